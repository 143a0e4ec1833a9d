"""How fast a space's constraints are checked and a grid is planned.

    python bench/plan_speed.py [--constraints 1024] [--points 1000000]

Writes a space at the loader's limits for constraints (1,024 by default) over a
196,608-point grid (3 x 4^8 values; every rule names two or three of the nine
parameters, so they form one group and no factoring helps), then times

  check    `--points` points (cycling through the grid) through the space's compiled
           checker (sweep.space.first_broken), all rules holding at most of them, so
           each point pays for every rule: points/s
  plan     the grid strategy's whole plan of the 196,608 points: points/s
  million  which rule each point of a 1,048,576-point grid (4^10, the same kind of
           rules) breaks first (sweep.space.legality, the grid plan's check): points/s
  each strategy  grid, random, factorized, learning and auto, started on the 196,608-point
           space (one group) and on a 1,048,576-point space of two 1,024-point groups (grid
           refuses that one: over its limit), each next to the grid's seconds of the same run;
           a Search (learning, auto) is timed to its first ask of 4 points
  machine  a loop of 10 million integer additions, to compare machines (an idle
           2020s x86 core takes about 0.5 s; a loaded one shows here)

Each line prints what was measured on this machine; nothing is assumed. The
target (issue 29): a million points in under 10 s.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweep import plan as strategies  # noqa: E402
from sweep.space import first_broken, legality, target  # noqa: E402

NAMES = [f"P{i}" for i in range(9)]


def space_file(folder: Path, n_constraints: int, names: list[str] = NAMES, first: list[int] = [32, 64, 128],
               strategy: dict | str = "grid", split: int = 0, file: str = "bench.yaml") -> Path:
    """split: with split > 0, the first `split` names and the rest are two groups (separate
    kernels, each rule within one), so the legal set is the product of two groups' legal sets."""
    (folder / "Makefile").write_text("all:\n")
    params = {n: {"values": [1, 2, 4, 8], "kernels": ["k" if not split or i < split else "k2"]}
              for i, n in enumerate(names) if i}
    params[names[0]] = {"values": first, "kernels": ["k"]}
    if split:   # a tag each (a shared tag letter would group them all)
        for n in names:
            params[n]["tag"] = n
        pairs = itertools.cycle(itertools.chain(itertools.combinations(names[:split], 2),
                                                itertools.combinations(names[split:], 2)))
    else:
        pairs = itertools.cycle(itertools.combinations(names, 2))
    rules = []
    for i in range(n_constraints):   # loose rules (most points pass all), varied in shape
        a, b = next(pairs)
        rules.append([f"{a} * {b} <= {1 << 20}", f"{a} + {b} != {i + 100000}", f"max({a}, {b}) // 1 >= 1",
                      f"({a} << 1) % 2 == 0 or {b} > 0"][i % 4])
    path = folder / file
    path.write_text(yaml.safe_dump({"name": "bench", "target": {"name": "t", "dir": str(folder), "profile": ["x"]},
                                    "strategy": strategy, "parameters": params, "constraints": rules}))
    return path


STRATEGIES = {"random": {"name": "random", "samples": 1000}, "factorized": "factorized",
              "learning": {"name": "learning", "budget": 100}, "auto": {"name": "auto", "budget": 100}}


def time_strategy(folder: Path, n_constraints: int, strategy: dict | str, **kw) -> tuple[float, str]:
    """Seconds from the loaded space to the strategy's plan (a Search: to its first ask of 4)."""
    space = target.load(space_file(folder, n_constraints, strategy=strategy, file="strategy.yaml", **kw))
    t0 = time.perf_counter()
    search = strategies.start(space)
    got = search.ask(4)
    dt = time.perf_counter() - t0
    return dt, f"{len(got):,} configurations{' in its plan' if isinstance(search, strategies.StaticSearch) else ' asked'}"


def each_strategy(folder: Path, n_constraints: int, grid_s: float | None, what: str, **kw) -> None:
    against = f"grid {grid_s:.2f} s" if grid_s is not None else "grid refuses it"
    for name, strategy in STRATEGIES.items():
        dt, got = time_strategy(folder, n_constraints, strategy, **kw)
        print(f"{name + ':':11} {what} in {dt:.2f} s ({against}; {got})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--constraints", type=int, default=1024)
    ap.add_argument("--points", type=int, default=1_000_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        space = target.load(space_file(Path(tmp), a.constraints))
        n, product = space.size()
        print(f"space: {len(space.constraints)} constraints over a {n:,}-point grid ({product})")
        grid = [dict(zip(NAMES, combo)) for combo in itertools.product(*(p.values for p in space.swept))]
        t0 = time.perf_counter()
        legal = 0
        for i in range(a.points):
            legal += first_broken(space.constraints, grid[i % len(grid)]) is None
        dt = time.perf_counter() - t0
        print(f"check: {a.points:,} points in {dt:.2f} s: {a.points / dt:,.0f} points/s ({legal:,} legal)")
        t0 = time.perf_counter()
        p = strategies.plan(space)
        dt = time.perf_counter() - t0
        print(f"plan:  the grid's {n:,} points in {dt:.2f} s: {n / dt:,.0f} points/s "
              f"({len(p.configs):,} legal, {len(p.skipped):,} skipped)")
        each_strategy(Path(tmp), a.constraints, dt, f"the {n:,}-point space")
        names = [f"Q{i}" for i in range(10)]
        big = target.load(space_file(Path(tmp), a.constraints, names, [1, 2, 4, 8]))
        n = big.size()[0]
        t0 = time.perf_counter()
        first = legality.first_broken_index(big.swept, {}, big.constraints)
        dt = time.perf_counter() - t0
        print(f"million: {n:,} points' first broken rule in {dt:.2f} s: {n / dt:,.0f} points/s "
              f"({int((first < 0).sum()):,} legal)")
        two = target.load(space_file(Path(tmp), a.constraints, names, [1, 2, 4, 8], split=5, file="two.yaml"))
        each_strategy(Path(tmp), a.constraints, None, f"the {two.size()[0]:,}-point space of two groups",
                      names=names, first=[1, 2, 4, 8], split=5)
    t0 = time.perf_counter()
    x = 0
    for i in range(10_000_000):
        x += i
    print(f"machine: 10 million integer additions in {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
