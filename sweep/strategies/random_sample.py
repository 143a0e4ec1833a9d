"""`samples` distinct legal points drawn uniformly from the grid (seeded)."""

from __future__ import annotations

import random

from sweep.space import Space, check, make_config
from sweep.strategies import Plan, Skipped


def plan(space: Space) -> Plan:
    rng = random.Random(space.strategy.seed)
    n, _ = space.size()
    want = min(space.strategy.samples, n)
    chosen, skipped, seen = [], [], set()
    attempts = 0
    while len(chosen) < want and attempts < 50 * want + 1000 and len(seen) < n:
        attempts += 1
        c = make_config(space, {p.macro: rng.choice(p.values) for p in space.swept})
        if c in seen:
            continue
        seen.add(c)
        reason = check(space, c)
        if reason is None:
            chosen.append(c)
        else:
            skipped.append(Skipped(c, reason))
    note = f"random: {len(chosen)} legal of {len(seen)} distinct draws (seed {space.strategy.seed}) from {n} points"
    return Plan(tuple(chosen), tuple(skipped), note)
