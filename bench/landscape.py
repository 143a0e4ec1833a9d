"""The shape of a brute-forced tuning space (a Kernel Tuner cache file): its local minima under
one-parameter moves, each one's basin of attraction, and the optimum's one-parameter neighbours.

    python bench/landscape.py /work/shared/benchmark-spaces/convolution/W6600.json.gz
    python bench/landscape.py FILE --runs ours --seeds 10 --budget 100   # where a strategy's runs went

A point's descent goes to its best legal neighbour (one parameter changed to any other value)
while that is strictly faster; a local minimum has no faster neighbour; its basin is every point
whose descent ends there.  Failed configurations are infinitely slow.  With --runs, each seed of
bench/strategies.py's strategy is replayed and the table says how many of its evaluations fell in
each basin and the best time it saw there: a strategy stuck above the optimum that did evaluate
points of the optimum's basin was misled by how they looked, not by never going there.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench.strategies as strategies  # noqa: E402
from bench.cache_spaces import load_space  # noqa: E402


def neighbours(space: dict, cfg: tuple):
    """Legal configurations one parameter away from cfg."""
    for j, k in enumerate(space["keys"]):
        for x in space["params"][k]:
            if x != cfg[j]:
                other = cfg[:j] + (x,) + cfg[j + 1:]
                if other in space["table"]:
                    yield other


def descent_basins(space: dict) -> dict[tuple, tuple]:
    """Each configuration's local minimum under steepest one-parameter descent."""
    time = {c: (v if isinstance(v, float) else np.inf) for c, v in space["table"].items()}
    step = {}
    for c in time:
        b = min(neighbours(space, c), key=time.__getitem__, default=c)
        step[c] = b if time[b] < time[c] else c
    root = {}
    for c in time:
        path = [c]
        while step[path[-1]] != path[-1] and path[-1] not in root:
            path.append(step[path[-1]])
        end = root.get(path[-1], path[-1])
        for p in path:
            root[p] = end
    return root


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("space", help="a Kernel Tuner cache file (.json or .json.gz)")
    ap.add_argument("--top", type=int, default=8, help="local minima to list")
    ap.add_argument("--runs", help="a bench/strategies.py strategy whose runs to place in the basins")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=100)
    a = ap.parse_args(argv)
    space = load_space(a.space)
    keys, opt = space["keys"], space["optimum"]
    root = descent_basins(space)
    size = Counter(root.values())
    minima = sorted(size, key=lambda c: space["table"][c])
    print(f"{space['name']}: {len(space['table'])} configurations, {len(minima)} local minima under "
          f"one-parameter moves")
    for c in minima[: a.top]:
        print(f"  {space['table'][c] / opt:7.3f}  basin {size[c]:5d} ({size[c] / len(root):5.1%})  "
              + " ".join(f"{k}={v}" for k, v in zip(keys, c) if len(space["params"][k]) > 1))
    best = minima[0]
    print("the optimum's neighbours (time / optimum; '-' illegal):")
    for j, k in enumerate(keys):
        if len(space["params"][k]) > 1:
            cells = []
            for x in space["params"][k]:
                v = space["table"].get(best[:j] + (x,) + best[j + 1:], "-")
                cells.append(f"{x}:{v / opt:.3f}" if isinstance(v, float) else f"{x}:{v}")
            print(f"  {k:14s} " + "  ".join(cells))
    if a.runs:
        visits: Counter = Counter()
        seen_best: dict[tuple, list[float]] = {c: [] for c in minima}
        for seed in range(a.seeds):
            run_best: dict[tuple, float] = {}
            strategies.Evaluator.last = None
            strategies.run_one((a.space, a.runs, seed, a.budget, True))
            if strategies.Evaluator.last is None:
                sys.exit(f"error: {a.runs} does not run through bench/strategies.py's Evaluator "
                         f"(ours, ours_batchN, random, tpe do)")
            for cfg in list(strategies.Evaluator.last.seen)[: a.budget]:
                m = root[cfg]
                visits[m] += 1
                v = space["table"][cfg]
                if isinstance(v, float):
                    run_best[m] = min(run_best.get(m, np.inf), v / opt)
            for m in minima:
                seen_best[m].append(run_best.get(m, np.inf))
        print(f"{a.runs}, {a.seeds} seeds x {a.budget} evaluations: evaluations per basin, the best time "
              f"a run saw there (median over runs)")
        for c in minima[: a.top]:
            print(f"  minimum {space['table'][c] / opt:7.3f}: {visits[c] / a.seeds:6.1f} per run, "
                  f"best seen {float(np.median(seen_best[c])):8.3f}")


if __name__ == "__main__":
    main()
