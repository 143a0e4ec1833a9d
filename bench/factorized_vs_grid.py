"""Does the factorized strategy pick what an exhaustive grid would?

    python bench/factorized_vs_grid.py [SPACE] [--backend events]

Sweeps SPACE (default spaces/factorized_check.yaml: two parameters, 5 x 5) once
as a full grid and once factorized (max(|values|) builds), then scores both
picks on the grid's own measurements: for each parameter group, the time of
the group's kernels at the factorized pick against the time at the grid's pick
(each the median over the grid jobs holding that value). Target (issue): the
factorized picks within 2% of the grid's best.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweep.decide import collect
from sweep.pipeline import driver as pipeline
from sweep.space import target  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("space", nargs="?", type=Path, default=ROOT / "spaces" / "factorized_check.yaml")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--jobs-dir", type=Path, default=ROOT / "jobs")
    ap.add_argument("--results-dir", type=Path, default=ROOT / "results")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "factorized-vs-grid.json")
    a = ap.parse_args()
    space = target.load(a.space)
    opts = pipeline.Options(executor="local", jobs_root=a.jobs_dir, results_root=a.results_dir, confirm=False)
    grid = pipeline.run(a.space, opts, strategy="grid", name=f"{space.name}-grid", backend=a.backend)
    fact = pipeline.run(a.space, opts, strategy="factorized", name=f"{space.name}-factorized", backend=a.backend)
    grid_m = collect.load_tables(Path(a.results_dir).resolve() / grid.sweep).measurements
    rows, worst = [], 0.0
    for gc in grid.best.choices:
        fc = next(c for c in fact.best.choices if c.macros == gc.macros)
        at = {tuple(c.values.values()): c.ns for c in gc.candidates}
        t_grid, t_fact = gc.best.ns, at[tuple(fc.values.values())]
        loss = (t_fact - t_grid) / t_grid
        worst = max(worst, loss)
        rows.append({"macros": gc.macros, "grid_pick": gc.values, "factorized_pick": fc.values, "grid_best_ns": t_grid,
                     "factorized_pick_ns_on_grid": t_fact, "loss": loss, "grid_noise_ns": gc.noise_ns})
        print(f"{'/'.join(gc.macros)}: grid picks {gc.values} ({t_grid / 1e3:.2f} us/iter), factorized picks {fc.values} "
              f"({t_fact / 1e3:.2f} us/iter on the grid's data): {100 * loss:+.2f}%")
    builds = (len(grid_m["tag"].unique()), fact.counts.get("ok", 0))
    print(f"builds: grid {builds[0]}, factorized {builds[1]}; worst loss {100 * worst:.2f}% (target <= 2%)")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"groups": rows, "worst_loss": worst, "grid_builds": builds[0],
                                 "factorized_builds": builds[1]}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
