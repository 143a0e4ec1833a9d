"""What proposing a space's declared defaults first does to a search, replayed from brute forces.

    python bench/defaults_first.py                     # every example space with a brute force, 20 seeds
    python bench/defaults_first.py --seeds 5 --spaces dedisp_H200 advec_H200 --jobs 2

Each case is an example space and a brute force of it (bench/data). The learning strategy runs through
`config-sweep choose`'s replay (sweep.pipeline.choose.compare: 10 proposals in flight, the oldest
told first, as a sweep runs it) twice per seed: as the space declares it, the defaults its first
proposal (`defaults_first`), and with every parameter's default removed, so the model starts from
its space-filling design alone. It prints, per case, where the defaults stand against the
optimum, each variant's median best-found / optimum at each budget and its median evaluations to
within 1% and 5%.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sweep.dispatch import replay  # noqa: E402
from sweep.pipeline import choose  # noqa: E402
from sweep.pipeline.recorded import answerer  # noqa: E402
from sweep.plan.base import declared_default_point  # noqa: E402
from sweep.space import Space, make_config, target  # noqa: E402

DATA = ROOT / "bench" / "data"
CASES = {   # brute force (bench/data/<name>.json.gz) -> the example space it is of
    "dedisp_H200": "examples/dedisp/space.yaml",
    "xgemm_H200": "examples/xgemm/space.yaml",
    "pnpoly_H200": "examples/pnpoly/space.yaml",
    "hotspot_H200": "examples/hotspot/space.yaml",
    "expdist_H200": "examples/expdist/space.yaml",
    "advec_H200": "examples/advec/space.yaml",
    "tiled_gemm_large_H200": "examples/tiled_gemm/space_large.yaml",
    "tiled_gemm_large_H100": "examples/tiled_gemm/space_large.yaml",
    "stencil_large_H200": "examples/stencil_cmake/space_large.yaml",
}


def without_defaults(space: Space) -> Space:
    """The space with no parameter declaring a default: nothing to propose first."""
    return dataclasses.replace(space, parameters=tuple(dataclasses.replace(p, default=None) for p in space.parameters))


def defaults_ratio(space: Space, recording: Path) -> float | None:
    """The declared defaults' recorded time over the recording's best (None: no legal defaults, or untimed)."""
    idx = replay.index(space, recording)
    answer = answerer(space, idx)
    point = declared_default_point(space)
    got = answer(make_config(space, point)) if point is not None else None
    if got is None or got.objective_ns is None:
        return None
    return got.objective_ns / choose.reference(space, idx, answer).best_ns


def compare_case(name: str, seeds: int, budgets: list[int], jobs: int) -> list[str]:
    space = target.load(ROOT / CASES[name])
    recording = DATA / f"{name}.json.gz"
    strategy = "learning"
    ratio = defaults_ratio(space, recording)
    out = [f"{name} ({CASES[name]}, {strategy}): the declared defaults are "
           + (f"{ratio:.3f}x the optimum" if ratio is not None else "not a timed legal point")]
    for label, variant in (("defaults first", space), ("no defaults", without_defaults(space))):
        ref, runs = choose.compare(variant, recording, names=[strategy], seeds=seeds, budgets=budgets, jobs=jobs)
        s = choose.summary(ref, runs, budgets)[strategy]
        medians = "  ".join(f"@{b} {s[b][1]:.3f}" for b in budgets)
        out.append(f"  {label:15s} {medians}  to 1% {s['to1']:>12s}  to 5% {s['to5']:>12s}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spaces", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budgets", default="25,50,100")
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args(argv)
    budgets = [int(b) for b in a.budgets.split(",")]
    print(f"median best-found / optimum over {a.seeds} seeds, 10 in flight (choose's replay)")
    for name in a.spaces:
        for line in compare_case(name, a.seeds, budgets, a.jobs):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
