"""What the learning strategy's stop by itself saves and costs, replayed on brute-forced spaces.

    python bench/stop_rule.py                                   # 30 seeds, the spaces below, the default patience
    python bench/stop_rule.py --patience 0,40,60,80 --budgets 100,200 --in-flight 10 --jobs 2

Each run asks for configurations up to the largest budget whatever the rule says (`ours`, or
with --in-flight N `ours_asyncN`: N proposals awaiting their results, as a sweep keeps them).
The rule reads the told times alone (sweep.plan.moves.out_of_patience), so where it would have
stopped is read off each prefix of the same run, for every patience at once. Per space,
patience and budget B, over the runs:

    stopped   runs the rule ended before B
    saved     evaluations not made, a run on average (all runs)
    lost>1%   runs it ended more than 1% above the best the same run found by B
    worst     the largest such loss

A run's loss compares it with itself run on to B: the rule's cost, not the strategy's.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cache_spaces import cached_space, check_space, load_name, space_files  # noqa: E402
from sweep.plan.moves import PATIENCE, PATIENCE_GAIN as GAIN, out_of_patience  # noqa: E402

# the three shared convolution spaces, and those committed here (the RTX 2080 Ti's, tiled_gemm's two)
DEFAULT_SPACES = ["/work/shared/benchmark-spaces/convolution", str(ROOT / "bench" / "data")]


def stop_at(trace: list[float | None], patience: int) -> int | None:
    """After how many evaluations the rule would have stopped this run (None: not within it)."""
    told: dict[tuple, tuple[float | None, str | None]] = {}
    order: list[tuple] = []
    for i, v in enumerate(trace):
        told[(i,)] = (v, None if v is not None else "failed")
        order.append((i,))
        if out_of_patience(told, order, patience, GAIN):
            return i + 1
    return None


def one_run(args: tuple) -> tuple[str, int, list[float | None]]:
    from strategies import run_ours
    path, seed, limit, in_flight = args
    trace, _ = run_ours(cached_space(path), seed, limit, in_flight=in_flight)
    return path, seed, trace


def best_by(trace: list[float | None], n: int) -> float:
    return min((v for v in trace[:n] if v is not None), default=float("inf"))


def table(runs: list[tuple[str, int, list]], patiences: list[int], budgets: list[int]) -> list[str]:
    lines = [f"{'space':24s} {'patience':>8s} {'budget':>6s} {'stopped':>9s} {'saved':>7s} {'lost>1%':>8s} {'worst':>7s}"]
    by_space: dict[str, list[list]] = {}
    for path, _, trace in runs:
        by_space.setdefault(path, []).append(trace)
    if len(by_space) > 1:
        by_space["all"] = [t for _, _, t in runs]
    for path, traces in by_space.items():
        name = load_name(path)
        for patience in patiences:
            stops = [stop_at(t, patience) for t in traces]
            for b in budgets:
                ended = [(s, t) for s, t in zip(stops, traces) if s is not None and s < b]
                losses = [best_by(t, s) / best_by(t, b) - 1 for s, t in ended]
                saved = sum(b - s for s, _ in ended) / len(traces)
                lost = sum(x > 0.01 for x in losses)
                worst = f"{max(losses):.1%}" if losses and max(losses) > 0.01 else "-"
                lines.append(f"{name:24s} {patience:8d} {b:6d} {len(ended):4d} of {len(traces):<2d} {saved:7.1f} "
                             f"{lost:8d} {worst:>7s}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spaces", nargs="*", default=DEFAULT_SPACES, help="Kernel Tuner cache files or folders of them")
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--patience", default=str(PATIENCE),
                    help="values to compare, comma-separated (default: the strategy's; 0: never stops)")
    ap.add_argument("--budgets", default="100,200")
    ap.add_argument("--in-flight", type=int, default=0, help="proposals awaiting results (0: each told first)")
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        patiences = [int(x) for x in a.patience.split(",")]
        budgets = sorted(int(x) for x in a.budgets.split(","))
    except ValueError:
        sys.exit(f"error: --patience {a.patience!r} and --budgets {a.budgets!r} take integers, comma-separated")
    files = [str(f) for f in space_files(a.spaces)]
    for f in files:   # one that cannot be replayed is refused here in one line, not in every worker
        check_space(f)
    jobs = [(f, seed, budgets[-1], a.in_flight) for f in files for seed in range(a.seeds)]
    with ProcessPoolExecutor(a.jobs) as ex:
        runs = list(ex.map(one_run, jobs))
    print(f"{len(runs)} runs of up to {budgets[-1]} evaluations, "
          f"{'each result told before the next ask' if not a.in_flight else f'{a.in_flight} in flight'}; "
          f"the rule: no gain over {GAIN:.1%} in the last `patience` evaluations and half of all")
    print("\n".join(table(runs, patiences, budgets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
