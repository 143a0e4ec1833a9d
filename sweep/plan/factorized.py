"""Factorized sweeps: measure every parameter group's values in max(|values|) builds.

A profile times each kernel separately, so one build can measure a value of
every parameter at once: the residual kernel's time in a build depends on
RESIDUAL_BLOCK_SIZE, not on GELU_BLOCK_SIZE. Parameters are grouped
(sweep.space.groups) when they cannot be varied apart: they share a tag (the three sides of a 3-D block), a
kernel pattern, or a constraint. Build i sets every group to its i-th legal
combination (each group's combinations shuffled with the space's seed, so
groups are not paired the same way in every sweep); a group with fewer
combinations than builds repeats its default (or first) combination.

The per-kernel argmin then needs max over groups of |combinations| builds
instead of the product. It assumes kernels do not interact through their
launch sizes; the combined pick is confirmed end to end after the sweep, and
that confirmation says whether the assumption held.
"""

from __future__ import annotations

import random

from sweep.space import Config, Parameter, Space, check, groups
from sweep.plan.base import Option, Plan, Skipped, StrategySpec, Ticker, constant_rules_break, group_combinations

__all__ = ["SPEC", "groups", "plan"]     # groups lives in sweep.space; kept here for older imports


def _filler(space: Space, group: list[Parameter], combos: list[dict[str, int]]) -> dict[str, int]:
    if all(p.default is not None for p in group):
        d = {p.macro: p.default for p in group}
        if d in combos or not combos:
            return d
    # no legal combination at all: every build breaks this group's rules and is skipped, saying which
    return combos[0] if combos else {p.macro: p.values[0] for p in group}


def plan(space: Space) -> Plan:
    rng = random.Random(SPEC.values(space.strategy)["seed"])
    gs = groups(space)
    base = {p.macro: (p.default if p.default is not None else p.values[0]) for p in space.swept}
    legal_combos, skipped = [], []
    for g in gs:
        combos, broken = group_combinations(space, g, base)
        skipped.extend(broken)
        rng.shuffle(combos)
        legal_combos.append(combos)
    builds = max((len(c) for c in legal_combos), default=0)
    configs: list[Config] = []
    fillers = [_filler(space, g, combos) for g, combos in zip(gs, legal_combos)]
    constant = constant_rules_break(space)
    shortest = min((len(c) for c in legal_combos), default=0)
    # make_config's result, built directly: every macro's value is a swept one's (a derived
    # parameter's is its source's), in the space's order
    order = tuple(p.macro for p in space.parameters)
    source = tuple(p.equals or p.macro for p in space.parameters)
    tick = Ticker(f"{space.name}: making {builds:,} builds")
    for i in range(builds):
        if i % 65536 == 65535:
            tick(i + 1, builds, "builds made")
        chosen = {}
        for combos, filler in zip(legal_combos, fillers):
            chosen.update(combos[i] if i < len(combos) else filler)
        c = Config(tuple(zip(order, [int(chosen[m]) for m in source])))
        # every group's own combination is legal (its rules were checked once, per group); only a
        # filler, or a rule naming no parameter, can break one
        reason = check(space, c) if i >= shortest else constant
        if reason is None:
            configs.append(c)
        else:  # only possible when a filler breaks a rule: say so rather than hide it
            skipped.append(Skipped(c, reason))
    product = 1
    for combos in legal_combos:
        product *= max(1, len(combos))
    sizes = "*".join(str(len(c)) for c in legal_combos)
    note = (f"factorized: {len(gs)} groups with {sizes} legal combinations; {builds} builds "
            f"instead of {product:,} for the full grid")
    return Plan(tuple(configs), tuple(skipped), note)


SPEC = StrategySpec(
    "factorized", "each build sets every parameter group to one of its legal combinations; max(|combinations|) "
                  "builds measure every group's values, since a profile times each kernel separately",
    options=(Option("seed", int, 0, "shuffles each group's combinations, so groups pair up differently per seed"),),
    plan=plan,
)
