"""A group's kernels at each of their launch shapes: the best value per shape, and the pick's regret.

A kernel launched at several problem sizes (the engine's matmul for the QKV,
projection and MLP layers; prepare_bias at three widths) may want a different
launch size at each, while conf.cuh sets one per macro. For every kernel x
shape of a group this says which value is fastest there and how much slower
the overall pick is (regret = pick / best - 1), so a pick that loses at one
shape what it wins at another shows.

Matching shapes across configurations: grid and block change with the launch
size, so a shape is known by its place among its kernel's shapes in one job,
ordered by threads launched (grid x block, which rounds up the problem size the
same way in every configuration), then by launches per iteration. A job whose
kernel has another number of shapes than most jobs do is left out for that
kernel. Times are per iteration (ns), the median over the jobs of a value.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Mapping

import pandas as pd

from sweep.records.evidence import ShapeBest


def _dims(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in str(text).split("x"))
    except ValueError:
        return (0,)


def indexed(rows: pd.DataFrame) -> pd.DataFrame:
    """rows (one job's or many jobs' measurements) with `index`: the shape's place among its
    kernel's shapes in its job, and `count`: how many shapes the kernel has there."""
    r = rows.copy()
    r["_threads"] = [math.prod(_dims(g)) * math.prod(_dims(b)) for g, b in zip(r["grid"], r["block"])]
    r = r.sort_values(["tag", "kernel", "_threads", "calls"], kind="stable")
    r["index"] = r.groupby(["tag", "kernel"]).cumcount()
    r["count"] = r.groupby(["tag", "kernel"])["kernel"].transform("size")
    return r.drop(columns="_threads")


def shape_bests(rows: pd.DataFrame, macros: tuple[str, ...], pick: Mapping[str, int]) -> tuple[ShapeBest, ...]:
    """Per kernel x shape of the group's ok sweep rows: its best values and the pick's regret.

    Empty when the group has one kernel shape or one measured value (the pick is
    then every shape's best by definition) or the pick was not measured in the sweep.
    """
    if rows.empty or not {"grid", "block", "calls", "total_median_ns", *macros} <= set(rows.columns):
        return ()
    if len(rows[list(macros)].drop_duplicates()) < 2:
        return ()
    r = indexed(rows)
    usual = {k: Counter(g.groupby("tag")["count"].first()).most_common(1)[0][0] for k, g in r.groupby("kernel")}
    r = r[[usual[k] == c for k, c in zip(r["kernel"], r["count"])]]
    if r[["kernel", "index"]].drop_duplicates().shape[0] < 2:
        return ()
    pick_key = tuple(int(pick[m]) for m in macros)
    out = []
    for (kernel, index), g in r.groupby(["kernel", "index"], sort=True):
        per = g.groupby(list(macros))["total_median_ns"].median()
        per.index = [k if isinstance(k, tuple) else (k,) for k in per.index]
        per.index = [tuple(int(v) for v in k) for k in per.index]
        if pick_key not in per.index:
            return ()
        best_key = min(per.index, key=lambda k: (per[k], k))
        mine = g[[tuple(int(v) for v in vals) == pick_key for vals in g[list(macros)].itertuples(index=False)]]
        first = mine.iloc[0]
        best_ns, pick_ns = float(per[best_key]), float(per[pick_key])
        out.append(ShapeBest(str(kernel), int(index), f"grid {first['grid']} block {first['block']}",
                             dict(zip(macros, best_key)), best_ns, pick_ns,
                             pick_ns / best_ns - 1 if best_ns > 0 else 0.0))
    return tuple(out)
