"""Factorized sweeps: measure every parameter group's values in max(|values|) builds.

A profile times each kernel separately, so one build can measure a value of
every parameter at once: the residual kernel's time in a build depends on
RESIDUAL_BLOCK_SIZE, not on GELU_BLOCK_SIZE. Parameters are grouped when they
cannot be varied apart: they share a tag (the three sides of a 3-D block), a
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

import ast
import itertools
import random

from sweep.space import Config, Parameter, Space, check, make_config
from sweep.strategies import Plan, Skipped


def _names(expr: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


def groups(space: Space) -> list[list[Parameter]]:
    """Swept parameters that must vary together, in declaration order."""
    swept = list(space.swept)
    root = {p.macro: p.macro for p in swept}
    source = {p.macro: (p.equals or p.macro) for p in space.parameters}

    def find(m: str) -> str:
        while root[m] != m:
            root[m] = root[root[m]]
            m = root[m]
        return m

    def union(a: str, b: str) -> None:
        root[find(a)] = find(b)

    for a, b in itertools.combinations(swept, 2):
        if a.tag == b.tag or set(a.kernels) & set(b.kernels):
            union(a.macro, b.macro)
    for c in space.constraints:
        named = sorted({source[n] for n in _names(c.expr) if n in source})
        for other in named[1:]:
            union(named[0], other)
    out: dict[str, list[Parameter]] = {}
    for p in swept:
        out.setdefault(find(p.macro), []).append(p)
    return list(out.values())


def _filler(space: Space, group: list[Parameter], combos: list[dict[str, int]]) -> dict[str, int]:
    if all(p.default is not None for p in group):
        d = {p.macro: p.default for p in group}
        if d in combos or not combos:
            return d
    # no legal combination at all: every build breaks this group's rules and is skipped, saying which
    return combos[0] if combos else {p.macro: p.values[0] for p in group}


def plan(space: Space) -> Plan:
    rng = random.Random(space.strategy.seed)
    gs = groups(space)
    base = {p.macro: (p.default if p.default is not None else p.values[0]) for p in space.swept}
    legal_combos, skipped = [], []
    for g in gs:
        combos = []
        for values in itertools.product(*(p.values for p in g)):
            chosen = dict(zip((p.macro for p in g), values))
            probe = make_config(space, {**base, **chosen})
            reason = _group_reason(space, g, probe)
            if reason is None:
                combos.append(chosen)
            else:
                skipped.append(Skipped(probe, reason))
        rng.shuffle(combos)
        legal_combos.append(combos)
    builds = max((len(c) for c in legal_combos), default=0)
    configs: list[Config] = []
    for i in range(builds):
        chosen = {}
        for g, combos in zip(gs, legal_combos):
            chosen.update(combos[i] if i < len(combos) else _filler(space, g, combos))
        c = make_config(space, chosen)
        reason = check(space, c)
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


def _group_reason(space: Space, group: list[Parameter], config: Config) -> str | None:
    """The first constraint about this group's parameters that `config` breaks."""
    mine = {p.macro for p in group} | {p.macro for p in space.parameters if p.equals in {g.macro for g in group}}
    relevant = [c for c in space.constraints if _names(c.expr) & mine]
    sub = Space(space.name, space.path, space.parameters, space.target, tuple(relevant))
    return check(sub, config)
