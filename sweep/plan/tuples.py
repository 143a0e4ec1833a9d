"""Seed 004's tuples: one build per row.

With explicit rows (`tuples: {columns, rows}`, or `strategy: {name: tuples,
columns, rows}`) each row sets its columns, and other swept parameters take
their default. Without rows, the parameters' value lists are zipped, as seed
004's table was read: row i takes each parameter's i-th value, and a list
shorter than the longest is padded with that parameter's default (seed 004's
encoder column had 8 values against 9).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from sweep.core.errors import SweepError
from sweep.space import Parameter, Space, launch_size, make_config
from sweep.space.sections import show
from sweep.plan.base import Option, Plan, StrategySpec, legal


def plan(space: Space) -> Plan:
    o = SPEC.values(space.strategy)
    defaults = {p.macro: p.default for p in space.swept}
    candidates = []
    if o["rows"]:
        columns = o["columns"] or tuple(p.macro for p in space.swept)
        for row in o["rows"]:
            chosen = dict(defaults)
            chosen.update(zip(columns, row))
            candidates.append(make_config(space, chosen))
        note = f"tuples: {len(o['rows'])} explicit rows"
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


def check(options: dict[str, Any], params: Sequence[Parameter], at: Callable[[str], str]) -> dict[str, Any]:
    """Columns name distinct swept parameters; rows list one launch size per column; a swept
    parameter without a column has a default."""
    if "columns" not in options and "rows" not in options:
        return options                      # the value lists are zipped
    swept = {p.macro: p for p in params if not p.derived}
    columns = options.get("columns", list(swept))
    if not all(isinstance(c, str) for c in columns):
        raise SweepError(f"{at('columns')}: {show(columns)} must be a list of parameter names")
    seen: set[str] = set()
    for c in columns:
        if c not in swept:
            raise SweepError(f"{at('columns')}: {show(c)} is not a swept parameter; swept parameters: {', '.join(swept)}")
        if c in seen:
            raise SweepError(f"{at('columns')}: {c} listed more than once; name each column once")
        seen.add(c)
    rows = options.get("rows")
    if not isinstance(rows, list) or not rows:
        raise SweepError(f"{at('rows')}: expected a list of rows, each a list of {len(columns)} integers")
    out = []
    for i, row in enumerate(rows):
        where = f"{at('rows')}[{i}]"
        if not isinstance(row, list) or len(row) != len(columns):
            raise SweepError(f"{where}: {show(row)} must list {len(columns)} values, one per column "
                             f"({', '.join(columns)})")
        out.append(tuple(launch_size(v, where, swept[c].floor) for v, c in zip(row, columns)))
    missing = [m for m, p in swept.items() if m not in seen and p.default is None]
    if missing:
        raise SweepError(f"{at('columns')}: {', '.join(missing)} has no column and no default; add a column or a default")
    return {"columns": tuple(columns), "rows": tuple(out)}


SPEC = StrategySpec(
    "tuples", "one build per row: explicit rows over some columns, or the value lists zipped",
    options=(
        Option("columns", list, (), "the swept parameters each row sets, in order (default: every swept parameter); "
                                    "the others take their default"),
        Option("rows", list, (), "the rows, each a list of one value per column; without rows the parameters' value "
                                 "lists are zipped"),
    ),
    plan=plan, check=check,
)
