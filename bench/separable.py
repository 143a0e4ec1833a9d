"""Two kernels timed apart, searched jointly or a model each: what the learning strategy loses by
modelling a program's kernels as one objective.

    python bench/separable.py bench/data/tiled_gemm_large_H200.json.gz bench/data/stencil_large_H200.json.gz
    python bench/separable.py A.json.gz B.json.gz --seeds 20 --budgets 25,50,100 --jobs 2

A program of two kernels, each with its own launch-size macros: kernel A's times are one
brute-forced space's (a Kernel Tuner cache file, as bench/strategies.py reads it), kernel B's
another's, and a build sets both kernels' macros, so one build measures one point of each (the
tool's profiles time each kernel apart). The legal set is the product of the two.

- **joint**: today's `learning` on such a space: one model over both kernels' parameters, told
  each build's summed time (each kernel's time over its optimum, so both count alike);
- **a model each**: the tool's `learning` with `per_group: true` (sweep.plan.per_group): one
  learning search per kernel, told its own kernel's time; each build sets the next proposal of each.

Both are scored as the tool picks (sweep.decide: per kernel, the fastest time that kernel had in
any build): the mean over the two kernels of best-found / optimum, median and quartiles over the
seeds, per budget (builds). A failed configuration in either cache fails its build, and both
searches are told the failure (the per-kernel search tells each kernel's model whose point was new
in that build: a build's failure does not say which kernel's values caused it).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.cache_spaces import cached_space  # noqa: E402
from sweep.plan.learning import Dim, LearningSearch  # noqa: E402
from sweep.plan.per_group import PerGroupSearch  # noqa: E402

STRATEGIES = ("joint", "a model each")


class Kernel:
    """One kernel of the two: a replayed space, its parameters named with a prefix."""

    def __init__(self, space: dict, prefix: str):
        self.space, self.prefix = space, prefix
        self.names = [prefix + k for k in space["keys"]]
        self.dims = [Dim(n, tuple(space["params"][k])) for n, k in zip(self.names, space["keys"])]
        self.legal = [dict(zip(self.names, c)) for c in space["table"]]
        self.legal_set = set(space["table"])

    def key(self, point: dict) -> tuple:
        return tuple(point[n] for n in self.names)

    def time(self, point: dict) -> float | None:
        """Its time at this point over its optimum; None where the configuration failed."""
        v = self.space["table"][self.key(point)]
        return v / self.space["optimum"] if isinstance(v, float) else None


def score(times: list[float | None], budget: int) -> float:
    """A kernel's pick at `budget` builds: its fastest time so far (inf if every one failed)."""
    ok = [t for t in times[:budget] if t is not None]
    return min(ok) if ok else float("inf")


def run(strategy: str, a: Kernel, b: Kernel, seed: int, budget: int) -> tuple[list, list]:
    """Each kernel's (scaled) time in each of `budget` builds (None for both in a failed build:
    a build that fails times neither)."""
    if strategy == "joint":
        search = LearningSearch(a.dims + b.dims, lambda p: a.key(p) in a.legal_set and b.key(p) in b.legal_set,
                                seed=seed, budget=budget)

        def tell(p: dict, x: float, y: float, ok: bool) -> None:
            search.tell(p, x + y if ok else None)
    else:          # the tool's `learning` with per_group: true
        search = PerGroupSearch([tuple(a.names), tuple(b.names)], a.dims + b.dims, [a.legal, b.legal], seed=seed,
                                budget=budget)

        def tell(p: dict, x: float, y: float, ok: bool) -> None:
            search.tell(p, x + y if ok else None, parts={tuple(a.names): x, tuple(b.names): y} if ok else None)
    ta: list[float | None] = []
    tb: list[float | None] = []
    while len(ta) < budget:
        got = search.ask(1)
        if not got:
            break
        x, y = a.time(got[0]), b.time(got[0])
        ok = x is not None and y is not None
        ta.append(x if ok else None), tb.append(y if ok else None)
        tell(got[0], x, y, ok)
    return ta, tb


def one(args):
    path_a, path_b, strategy, seed, budget, budgets = args
    a, b = Kernel(cached_space(path_a), "a."), Kernel(cached_space(path_b), "b.")
    t0 = time.process_time()
    ta, tb = run(strategy, a, b, seed, budget)
    return strategy, [(score(ta, n) + score(tb, n)) / 2 for n in budgets], time.process_time() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kernel_a", help="a Kernel Tuner cache file (.json or .json.gz): kernel A's times")
    ap.add_argument("kernel_b", help="another: kernel B's times")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budgets", default="25,50,100", help="comma list of builds")
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        budgets = sorted({int(x) for x in a.budgets.split(",") if x.strip()})
    except ValueError:
        sys.exit(f"error: --budgets {a.budgets!r}: give a comma list of positive integers, e.g. 25,50,100")
    if not budgets or budgets[0] < 1:
        sys.exit(f"error: --budgets {a.budgets!r}: give a comma list of positive integers, e.g. 25,50,100")
    for path in (a.kernel_a, a.kernel_b):
        if not Path(path).is_file():
            sys.exit(f"error: {path}: no such file (give a Kernel Tuner cache file)")
    tasks = [(a.kernel_a, a.kernel_b, s, seed, budgets[-1], budgets) for s in STRATEGIES for seed in range(a.seeds)]
    t0 = time.time()
    with ProcessPoolExecutor(max(1, a.jobs)) as pool:
        rows = list(pool.map(one, tasks))
    print(f"kernel A: {Path(a.kernel_a).name}, kernel B: {Path(a.kernel_b).name}; {a.seeds} seeds; the mean over "
          "the two kernels of best-found / optimum, median [q1, q3]")
    print(f"{'strategy':14s}" + "".join(f"{'@' + str(n):>10s}{'':15s}" for n in budgets) + f"{'cpu s/run':>11s}")
    for s in STRATEGIES:
        got = np.array([r[1] for r in rows if r[0] == s])
        cpu = np.mean([r[2] for r in rows if r[0] == s])
        cells = "".join(f"{np.median(got[:, i]):>10.3f} [{np.quantile(got[:, i], .25):.3f}, "
                        f"{np.quantile(got[:, i], .75):.3f}]" for i in range(len(budgets)))
        print(f"{s:14s}{cells}{cpu:>11.1f}")
    print(f"({len(tasks)} runs in {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
