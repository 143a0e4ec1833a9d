"""`samples` distinct legal points drawn uniformly from the grid (seeded)."""

from __future__ import annotations

import random
from typing import Iterator

from sweep.space import Config, Space, make_config
from sweep.strategies import Plan, legal


def plan(space: Space) -> Plan:
    rng = random.Random(space.strategy.seed)
    n, _ = space.size()
    want = min(space.strategy.samples, n)
    drawn: set[Config] = set()

    def draws() -> Iterator[Config]:
        # Bounded: a space whose legal points are rarer than `want` must not draw forever.
        for _ in range(50 * want + 1000):
            if len(drawn) >= n:
                return
            c = make_config(space, {p.macro: rng.choice(p.values) for p in space.swept})
            drawn.add(c)
            yield c

    chosen = legal(space, draws(), want)
    note = f"random: {len(chosen.configs)} legal of {len(drawn)} distinct draws (seed {space.strategy.seed}) from {n} points"
    return Plan(chosen.configs, chosen.skipped, note)
