"""Picks over several workloads: each workload's own pick, and the overall pick by the weighted objective.

A space's workloads (sweep.space.workloads) are the runs its program serves, each
with a weight: how often it happens. conf.cuh holds one value per macro for all of
them, so the overall pick minimizes what the group's kernels cost over the mix,

    J(values) = sum over workloads w of  weight_w x time_w(values)

time_w being the group's per-iteration time on workload w (its kernels' launch
shapes summed, median over the jobs of those values, as for one run). With weights
that count how often each run happens, J is the group's kernel time per unit of
that traffic: a value that loses 5% on a run happening once and wins 2% on one
happening ten times is worth taking, and J says so where an unweighted sum or a
vote over workloads would not. A workload that never launches the group's kernels
(decoding runs no flash attention) adds nothing to any candidate: its launch sizes
cost nothing there. A job counts for J only where it measured the group on every
workload that launches it.

Evidence on J comes from samples of J: a job's i-th sample is the weighted sum of
the i-th per-iteration sample of each workload (the shortest workload's count
taken). Samples within a workload are independent draws, so such sums are draws
of J, and the rank-based comparison (sweep.stats.compare) applies unchanged.

Each workload also gets its own pick (the fastest values there, with their own
evidence) and the overall pick's regret there: overall / own - 1, what running
the overall pick instead of that workload's own costs on it (WorkloadPick). The
overall pick's per-shape regrets are given per workload too (ShapeBest.workload).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from sweep.decide.candidates import COLUMNS, decide, group_rows, group_times
from sweep.records.evidence import Certification, WorkloadPick
from sweep.profile import Measurement
from sweep.records import Choice
from sweep.decide.shapes import shape_bests
from sweep.space import Space
from sweep.space.workloads import DEFAULT, weights


def workload_of(rows: pd.DataFrame) -> pd.Series:
    """Each row's workload ("" where the table predates workloads or the space has none)."""
    if "workload" not in rows:
        return pd.Series(DEFAULT, index=rows.index, dtype=object)
    return rows["workload"].astype(object).fillna(DEFAULT).astype(str)   # object: an all-empty CSV column is float


def only(rows: pd.DataFrame, workload: str) -> pd.DataFrame:
    """The rows measured in one workload."""
    return rows if rows.empty else rows[workload_of(rows) == workload]


def weighted_ns(rows: pd.DataFrame, w: Mapping[str, float]) -> float:
    """The rows' per-iteration times (total_median_ns) weighted by their workload: J of one job."""
    if rows.empty:
        return 0.0
    return float((rows["total_median_ns"] * workload_of(rows).map(lambda n: w.get(n, 1.0))).sum())


def objective_of(measurements: Iterable[Measurement], w: Mapping[str, float]) -> float:
    """J of one job's Measurements (already restricted to the kernels that count)."""
    return sum(m.total_median_ns * w.get(m.workload, 1.0) for m in measurements)


def weighted_times(per: Mapping[str, pd.DataFrame], w: Mapping[str, float], macros: tuple[str, ...]) -> pd.DataFrame:
    """One per-job table (group_times' columns) of J from each workload's table: the jobs measured
    on every workload whose table is not empty; ns and the samples weighted sums, std the spread
    of the sum, runs the most, iterations the fewest."""
    per = {name: t.set_index("tag") for name, t in per.items() if not t.empty}
    if not per:
        return pd.DataFrame(columns=[*COLUMNS, *macros])
    tags = sorted(set.intersection(*(set(t.index) for t in per.values())))
    out = []
    for tag in tags:
        parts = [(w.get(name, 1.0), t.loc[tag]) for name, t in per.items()]
        samples = None
        if all(r["samples"] is not None for _, r in parts):
            n = min(len(r["samples"]) for _, r in parts)
            samples = tuple(float(x) for x in sum(k * np.asarray(r["samples"][:n], dtype=float) for k, r in parts))
        its = [r["iterations"] for _, r in parts if r["iterations"] is not None and not pd.isna(r["iterations"])]
        first = parts[0][1]
        out.append({
            "tag": tag, "ns": float(sum(k * r["ns"] for k, r in parts)),
            "std_ns": math.sqrt(sum((k * r["std_ns"]) ** 2 for k, r in parts)),
            "kernels": tuple(sorted({x for _, r in parts for x in r["kernels"]})), "samples": samples or None,
            "runs": int(max(r["runs"] for _, r in parts)), "iterations": min(its) if its else None,
            "threads": int(max(r["threads"] for _, r in parts)),
            "node": next((r["node"] for _, r in parts if r["node"]), ""), **{m: first[m] for m in macros}})
    return pd.DataFrame(out, columns=[*COLUMNS, *macros])


def job_samples(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], role: str,
                values: Mapping[str, int] | None = None) -> tuple[float, ...]:
    """Samples of J for the group's kernels in the jobs of `role` ("best", "baseline"; "sweep" with
    `values`, the group's values those jobs ran), pooled: weighed as the sweep's candidates are
    (() where none was kept)."""
    if values is not None and not measurements.empty:   # those jobs' rows first: a large sweep has thousands
        measurements = measurements[np.logical_and.reduce([measurements[k].to_numpy() == v
                                                           for k, v in values.items()])]
    w = weights(space)
    per = {name: group_times(space, only(measurements, name), macros, role) for name in w}
    return tuple(x for s in weighted_times(per, w, macros)["samples"] if s is not None for x in s)


def choose(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], baseline_ns: float | None = None,
           certification: Certification | None = None) -> Choice | None:
    """A group's Choice over the space's workloads: the overall pick by J (or the race's, which
    races on J), each workload's own pick and the overall pick's regret there."""
    w = weights(space)
    per = {name: group_times(space, only(measurements, name), macros) for name in w}

    def shapes(pick: Mapping[str, int]) -> tuple:
        return tuple(replace(s, workload=name) for name in w
                     for s in shape_bests(group_rows(space, only(measurements, name), macros), macros, pick))

    overall = decide(weighted_times(per, w, macros), macros, shapes, baseline_ns, certification)
    if overall is None:
        return None
    picks = []
    for name, t in per.items():
        own = decide(t, macros, lambda pick: ())
        if own is not None:
            picks.append(workload_pick(name, w[name], own, overall.values))
    return replace(overall, workloads=tuple(picks))


def workload_pick(name: str, weight: float, own: Choice, overall: Mapping[str, int]) -> WorkloadPick:
    """A workload's own Choice as its WorkloadPick, with the overall pick's time and regret there."""
    there = next((c for c in own.candidates if c.values == dict(overall)), None)
    overall_ns = there.ns if there is not None else None
    regret = overall_ns / own.best.ns - 1 if overall_ns is not None and own.best.ns > 0 else None
    return WorkloadPick(name, weight, dict(own.values), own.best.tag, own.best.ns, overall_ns, regret,
                        dict(own.runner_up.values) if own.runner_up is not None else None, own.margin, own.verdict,
                        len(own.candidates), own.noise_source)
