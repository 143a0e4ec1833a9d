"""`samples` distinct legal points drawn uniformly from the space, seeded.

Points are drawn from the legal set, not from the grid with the illegal ones
thrown back: a space where 3% of the grid is legal still gives `samples` legal
points, and nothing is recorded as skipped. Every constraint speaks about one
parameter group (sweep.space.groups), so the legal set is the product of each
group's legal combinations; each group of up to GRID_LIMIT combinations is
enumerated, and a distinct sample of the product is drawn by index.

A group too large to enumerate is drawn value by value with its constraints
checked, at most ATTEMPTS_PER_SAMPLE tries per wanted point and MAX_DRAWS in
all; the note says how many legal points that found.
"""

from __future__ import annotations

import random

from sweep.space import Config, Parameter, Space, check, first_broken, group_constraints, groups, make_config
from sweep.plan.base import GRID_LIMIT, Option, Plan, StrategySpec, constant_rules_break, group_combinations, \
    group_size

ATTEMPTS_PER_SAMPLE = 100
MAX_DRAWS = 200_000


def plan(space: Space) -> Plan:
    o = SPEC.values(space.strategy)
    rng, want, seed = random.Random(o["seed"]), o["samples"], o["seed"]
    n, product = space.size()
    gs = groups(space)
    first = {p.macro: p.values[0] for p in space.swept}
    if all(group_size(g) <= GRID_LIMIT for g in gs):
        combos = [group_combinations(space, g, first)[0] for g in gs]
        total = 1
        for c in combos:
            total *= len(c)
        configs = [_config(space, combos, i) for i in rng.sample(range(total), min(want, total))]
        if constant_rules_break(space) is not None:   # only a rule naming no parameter can fail here
            configs = []
        note = (f"random: {len(configs)} of the {total:,} legal points (seed {seed}) of the {n:,}-point grid "
                f"({product})")
        return Plan(tuple(configs), (), note)
    found, draws = _draw(space, gs, rng, want)
    note = (f"random: found {len(found)} legal of {want} wanted in {draws:,} draws (seed {seed}); the grid "
            f"({n:,} points, {product}) has a parameter group too large to enumerate")
    return Plan(tuple(found), (), note)


def _config(space: Space, combos: list[list[dict[str, int]]], index: int) -> Config:
    """The index-th point of the product of the groups' legal combinations (mixed radix)."""
    chosen: dict[str, int] = {}
    for c in reversed(combos):
        index, r = divmod(index, len(c))
        chosen.update(c[r])
    return make_config(space, chosen)


def _draw(space: Space, gs: list[list[Parameter]], rng: random.Random, want: int) -> tuple[list[Config], int]:
    """Up to `want` distinct legal points, each group drawn until its constraints hold; bounded tries."""
    small = {i: group_combinations(space, g, {p.macro: p.values[0] for p in space.swept})[0]
             for i, g in enumerate(gs) if group_size(g) <= GRID_LIMIT}
    if any(not c for c in small.values()):
        return [], 0
    rules = {i: group_constraints(space, g) for i, g in enumerate(gs)}
    derived = list(space.followers.items())
    found: dict[Config, None] = {}
    budget = min(ATTEMPTS_PER_SAMPLE * want, MAX_DRAWS)
    draws = 0
    while len(found) < want and draws < budget:
        chosen: dict[str, int] = {}
        for i, g in enumerate(gs):
            if i in small:
                chosen.update(rng.choice(small[i]))
                continue
            while draws < budget:      # one try of this group's values
                draws += 1
                values = {p.macro: rng.choice(p.values) for p in g}
                values.update((m, values[src]) for m, src in derived if src in values)
                if first_broken(rules[i], values) is None:
                    chosen.update(values)
                    break
            else:
                return list(found), draws
        c = make_config(space, chosen)
        if check(space, c) is None:
            found[c] = None
    return list(found), draws


SPEC = StrategySpec(
    "random", "`samples` distinct points drawn uniformly from the legal set",
    options=(
        Option("samples", int, 20, "how many distinct legal points to draw (all of them, if fewer are legal)",
               lo=1, hi=1_000_000),
        Option("seed", int, 0, "seeds the draw: the same seed draws the same points"),
    ),
    plan=plan,
)
