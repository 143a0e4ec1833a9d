"""Seed 004's tuples: one build per row.

With explicit `tuples: {columns, rows}` each row sets its columns (other swept
parameters take their default). Without rows, the parameters' value lists are
zipped, as seed 004's table was read: row i takes each parameter's i-th value,
and a list shorter than the longest is padded with that parameter's default
(seed 004's encoder column had 8 values against 9).
"""

from __future__ import annotations

from sweep.errors import SweepError
from sweep.space import Space, make_config
from sweep.strategies import Plan, legal


def plan(space: Space) -> Plan:
    s = space.strategy
    defaults = {p.macro: p.default for p in space.swept}
    candidates = []
    if s.rows:
        for row in s.rows:
            chosen = dict(defaults)
            chosen.update(zip(s.columns, row))
            candidates.append(make_config(space, chosen))
        note = f"tuples: {len(s.rows)} explicit rows"
    else:
        n = max(len(p.values) for p in space.swept)
        for i in range(n):
            chosen = {}
            for p in space.swept:
                if i < len(p.values):
                    chosen[p.macro] = p.values[i]
                elif p.default is not None:
                    chosen[p.macro] = p.default
                else:
                    raise SweepError(f"{space.path}: parameters.{p.macro} has {len(p.values)} values but the zipped "
                                     f"tuples need {n}; give it a default to pad with, or equal-length lists")
            candidates.append(make_config(space, chosen))
        note = f"tuples: {n} rows zipped from the value lists"
    p = legal(space, candidates)
    return Plan(p.configs, p.skipped, note)
