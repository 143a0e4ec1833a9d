"""Which constraint each point of a grid breaks first, for all of its points at once.

A space at the loader's limits (1,024 constraints over a grid of 200,000 points)
took minutes when every point ran every rule through the interpreter. Here each
rule is tested once per combination of the few parameters it reads (a table,
filled by the same compiled evaluator as `first_broken`, so the semantics are
Python's, errors included), and the table is then looked up for every point still
legal with numpy. Rules are taken in file order and a point leaves the active set
at the first one it breaks, so what each point is charged with is the first rule
it breaks, as `first_broken` says. A rule over parameters with more combinations
than TABLE_LIMIT is evaluated at each active point instead.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Mapping, Sequence

import numpy as np

from sweep.space import expr
from sweep.space.model import Constraint, Parameter

TABLE_LIMIT = 1 << 16     # combinations of one rule's parameters worth tabulating
HOLDS, FALSE, FAILS = 0, 1, 2


def first_broken_index(params: Sequence[Parameter], derived: Mapping[str, str], constraints: Sequence[Constraint],
                       tick: Callable[[int, int], None] | None = None) -> np.ndarray:
    """For each point of the product of `params`' values (itertools.product order), the
    index of the first of `constraints` it breaks (false, or cannot be evaluated); -1 when
    it breaks none. `derived` maps a derived macro to the parameter it equals; `tick(done,
    of)` is called after each rule (for progress lines)."""
    sizes = [len(p.values) for p in params]
    n = math.prod(sizes)
    axis = {p.macro: i for i, p in enumerate(params)}
    axis.update((m, axis[src]) for m, src in derived.items() if src in axis)
    strides = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
    first = np.full(n, -1, dtype=np.int32)
    coords: dict[int, np.ndarray] = {}

    def coord(a: int) -> np.ndarray:
        """Each point's index into parameter a's values (made once per parameter a rule reads)."""
        if a not in coords:
            coords[a] = ((np.arange(n, dtype=np.int64) // strides[a]) % sizes[a]).astype(np.int32)
        return coords[a]

    for ci, c in enumerate(constraints):
        check, args = expr.checker((c.expr,))
        axes = sorted({axis[a] for a in args})
        if math.prod(sizes[a] for a in axes) <= TABLE_LIMIT:
            # every combination of the rule's parameters once, then looked up for all points
            table = np.empty([sizes[a] for a in axes], dtype=np.int8)
            for index in itertools.product(*(range(sizes[a]) for a in axes)):
                at = dict(zip(axes, index))
                table[index] = _status(check(*[params[axis[x]].values[at[axis[x]]] for x in args]))
            if not table.any():
                newly = None                 # it holds everywhere: nothing to look up
            else:
                newly = (table[tuple(coord(a) for a in axes)] != HOLDS) & (first < 0)
        else:                                # too many combinations: each point not yet broken, one by one
            active = np.flatnonzero(first < 0)
            values = [np.asarray(params[axis[x]].values, dtype=object)[coord(axis[x])[active]] for x in args]
            bad = np.fromiter((_status(check(*vs)) != HOLDS for vs in zip(*values)), dtype=bool, count=active.size)
            newly = active[bad]
        if newly is not None:
            first[newly] = ci
            if ci % 64 == 63 and not (first < 0).any():
                break                        # every point is broken: later rules change nothing
        if tick is not None:
            tick(ci + 1, len(constraints))
    return first


def _status(out: object) -> int:
    return HOLDS if out == -1 else FAILS if isinstance(out, tuple) else FALSE
