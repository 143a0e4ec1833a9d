"""How far the learning strategy could get if it were told which side of a switch holds the
optimum: a ceiling for any rule that chooses where to spend a run's evaluations between the
sides of a two-valued parameter (shared memory or not).

    S=/work/shared/benchmark-spaces/convolution
    python bench/side_oracle.py $S/W6600.json.gz --side use_shmem=0 --budget 50 --seeds 20

Runs, on one replayed space (a Kernel Tuner cache file, as bench/strategies.py reads it), the
default learning strategy and the same strategy with every `share`-th model step searching the
given side (`--side NAME=VALUE`) by that side's own model, from the first step after the start.
The side is chosen by the person running this, from the brute force: the variant knows what no
strategy can know. Prints per variant the runs within 5% of the optimum at the budget, the median
best-found / optimum there, and the median evaluations to within 1% (bench/STRATEGIES.md: the
convolution spaces' optima sit on use_shmem=0, and W6600's next best point outside 5% is 1.196x).
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.cache_spaces import cached_space  # noqa: E402
from bench.strategies import run_ours  # noqa: E402
from bench.strategy_table import best_at, evals_to  # noqa: E402
from sweep.plan.learning import LearningSearch  # noqa: E402


class SideOracle(LearningSearch):
    """LearningSearch whose every `share`-th model step searches the side `side` = (parameter name,
    value) by that side's own model (LearningSearch._side_search)."""

    def __init__(self, dims, *, side: tuple[str, object], share: int, **kw):
        super().__init__(dims, **kw)
        self.side_dim = self.names.index(side[0])
        self.side_level = self._index[self.side_dim][side[1]]
        self.share = share

    def _by_model(self, cands, done, rng):
        if (len(self.told) + len(self.pending)) % self.share == 1:
            found = self._side_search(cands, done, self.side_dim, self.side_level, rng)
            if found is not None:
                return found
        return super()._by_model(cands, done, rng)


def one(args):
    path, seed, budget, side, share = args
    space = cached_space(path)
    make = partial(SideOracle, side=side, share=share) if share else None
    trace, _ = run_ours(space, seed, budget, make=make)
    return share, best_at(trace, space["optimum"], budget), evals_to(trace, space["optimum"], 0.01)


def parse_side(text: str, space: dict) -> tuple[str, object]:
    name, _, raw = text.partition("=")
    values = space["params"].get(name)
    if values is None or len(values) != 2:
        sys.exit(f"error: --side {text}: {name!r} is not a two-valued parameter of {space['name']} "
                 f"(those are: {', '.join(k for k, v in space['params'].items() if len(v) == 2)})")
    match = [v for v in values if str(v) == raw]
    if not match:
        sys.exit(f"error: --side {text}: {name} takes {values[0]} or {values[1]}")
    return name, match[0]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("space", help="a Kernel Tuner cache file (.json or .json.gz)")
    ap.add_argument("--side", required=True, help="NAME=VALUE: the side of a two-valued parameter to favour")
    ap.add_argument("--shares", default="2,3", help="comma list: every Nth model step searches the side")
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    space = cached_space(a.space)   # the workers forked below share it
    side = parse_side(a.side, space)
    shares = [0] + [int(s) for s in a.shares.split(",")]
    seeds = range(a.first_seed, a.first_seed + a.seeds)
    tasks = [(a.space, seed, a.budget, side, share) for share in shares for seed in seeds]
    with ProcessPoolExecutor(a.jobs) as pool:
        results = list(pool.map(one, tasks))
    print(f"{space['name']}, budget {a.budget}, seeds {seeds.start}-{seeds.stop - 1}, side {side[0]}={side[1]}")
    for share in shares:
        best = np.array([b for s, b, _ in results if s == share])
        to1 = np.median([e for s, _, e in results if s == share])
        what = "the default" if not share else f"1 in {share} model steps on the side"
        print(f"  {what:38s} within 5% at {a.budget}: {int((best <= 1.05).sum()):2d} of {len(best)}   "
              f"median {np.median(best):.5f}   to 1%: {'>' + str(a.budget) if math.isinf(to1) else f'{to1:g}'}")


if __name__ == "__main__":
    main()
