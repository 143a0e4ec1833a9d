"""One parameter group's candidates and its pick with the evidence, from a per-job time table.

    group_rows(space, m, macros)     the ok measurement rows of a role for the group's kernels
    group_times(space, m, macros)    per ok sweep job: the group's per-iteration time (ns), spread,
                                     samples, runs, iterations, threads per block, node and values
    decide(t, macros, ...)           the Choice from such a table: candidates (a value combination's
                                     time is the median over its jobs), the pick, the runner-up
                                     and the evidence (sweep.decide.select's docstring says which)

A table may also be a combination of several (sweep.decide.objective: the weighted objective over
workloads, in the same columns), so the evidence is computed one way for both.
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from sweep.records.evidence import Certification, ShapeBest
from sweep.records import Candidate, Choice, values_words
from sweep.space import Parameter, Space, groups
from sweep.stats import MIN_SAMPLES_FOR_NOISE, compare, summarize
from sweep.stats.race import EQUIVALENCE

NOISE_SIGMAS = 2.0
ALPHA = 0.05
TIE_NOTE = "within run-to-run noise of the runner-up: either is as good"
UNKNOWN_NOTE = ("noise unknown: fewer than 3 samples per candidate (one timed iteration per run and no repeats), "
                "so the margin is no evidence; set run.repeats, or time more iterations")

def patterns(space: Space, macros: tuple[str, ...]) -> tuple[str, ...]:
    ps: list[str] = []
    for p in space.parameters:
        if p.macro in macros or p.equals in macros:
            ps.extend(k for k in p.kernels if k not in ps)
    return tuple(ps)


def kernel_groups(space: Space, measurements: pd.DataFrame) -> list[list[Parameter]]:
    """The space's parameter groups (sweep.space.groups), joined where their kernel patterns
    match a common kernel among those measured: `k_*` and `*` both govern k_a, so their
    parameters are one group and k_a is counted once, whatever the pattern strings say."""
    gs = groups(space)
    if measurements.empty or "kernel" not in measurements or len(gs) < 2:
        return gs
    root = list(range(len(gs)))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    pats = [patterns(space, tuple(p.macro for p in g)) for g in gs]
    for kernel in sorted(set(measurements["kernel"])):
        governing = [i for i, ps in enumerate(pats) if _matches(kernel, ps)]
        for i in governing[1:]:
            root[find(i)] = find(governing[0])
    joined: dict[int, list[Parameter]] = {}
    for i, g in enumerate(gs):
        joined.setdefault(find(i), []).extend(g)
    order = {p.macro: n for n, p in enumerate(space.swept)}
    return [sorted(g, key=lambda p: order[p.macro]) for g in joined.values()]


def _matches(kernel: str, pats: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(kernel, p) for p in pats)


def group_rows(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], role: str = "sweep") -> pd.DataFrame:
    """The ok measurement rows of `role` for the group's kernels."""
    if measurements.empty:
        return measurements
    m = measurements[(measurements["status"] == "ok") & (measurements["role"] == role)]
    pats = patterns(space, macros)
    return m[m["kernel"].map(lambda k: _matches(k, pats))]


def _summed_samples(values: list) -> tuple[float, ...] | None:
    """One job's per-iteration samples of the group: its shapes' samples (`values`, one a row)
    summed iteration by iteration (None when a row has none or the shapes' counts differ)."""
    lists = [np.asarray(v, dtype=float) for v in values if v is not None and not _is_nan(v)]
    if len(lists) != len(values) or not lists or len({x.size for x in lists}) != 1 or lists[0].size == 0:
        return None
    return tuple(float(x) for x in np.sum(lists, axis=0))


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _groups(t: pd.DataFrame, keys: str | list[str]) -> list[np.ndarray]:
    """The row positions of each group of t.groupby(keys) (sorted, NaN keys dropped), in the order
    iterating it gives, each in row order: one pass, where taking each group as a DataFrame
    costs milliseconds a group (thousands on a large sweep)."""
    codes = t.groupby(keys, sort=True).ngroup().to_numpy(dtype=float)
    kept = np.flatnonzero(~np.isnan(codes))
    order = kept[np.argsort(codes[kept], kind="stable")]
    return np.split(order, np.flatnonzero(np.diff(codes[order])) + 1) if len(order) else []


def _sum(values: np.ndarray) -> float:
    """Series.sum() of values (NaN skipped), without building a Series for the common single row."""
    if len(values) == 1:
        return 0.0 if math.isnan(values[0]) else float(values[0])
    return float(pd.Series(values).sum())


def _median(values: np.ndarray) -> float:
    """Series.median() of values, without building a Series for the common single row."""
    return float(values[0]) if len(values) == 1 else float(pd.Series(values).median())


def _known(values: np.ndarray, default: Any, how: Any) -> Any:
    """how (min or max) of the known values, or `default` where there are none."""
    known = [v for v in values if not pd.isna(v)]
    return int(how(known)) if known else default


def _node(gpu_uuid: Any, host: Any) -> str:
    for v in (gpu_uuid, host):
        if isinstance(v, str) and v:
            return v
    return ""


COLUMNS = ["tag", "ns", "std_ns", "kernels", "samples", "runs", "iterations", "threads", "node"]


def group_times(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], role: str = "sweep") -> pd.DataFrame:
    """Per ok job of `role` (the sweep's by default): the group's values, its kernels' per-iteration
    time (ns), spread, samples, runs pooled, iterations, threads per block and node."""
    m = group_rows(space, measurements, macros, role)
    if m.empty:
        return pd.DataFrame(columns=[*COLUMNS, *macros])
    absent = np.full(len(m), np.nan, dtype=object)

    def column(name: str) -> np.ndarray:   # each column read once, not once a job
        return m[name].to_numpy() if name in m else absent

    tag, kernel, samples_of = column("tag"), column("kernel"), column("iter_total_ns")
    total, spread = m["total_median_ns"].to_numpy(dtype=float), m["total_std_ns"].to_numpy(dtype=float)
    runs, iterations, threads = column("runs"), column("iterations"), column("threads_per_block")
    uuid, host = column("gpu_uuid"), column("host")
    values = {k: m[k].to_numpy() for k in macros}
    rows = []
    for at in _groups(m, "tag"):
        first = at[0]
        samples = _summed_samples(list(samples_of[at])) if "iter_total_ns" in m else None
        rows.append({
            "tag": tag[first], "ns": float(np.median(samples)) if samples else _sum(total[at]),
            "std_ns": math.sqrt(_sum(spread[at] ** 2)), "kernels": tuple(sorted(set(kernel[at]))),
            "samples": samples, "runs": int(_known(runs[at], 1, max)),
            "iterations": _known(iterations[at], None, min),
            "threads": int(_known(threads[at], 0, max)),
            "node": _node(uuid[first], host[first]), **{k: v[first] for k, v in values.items()}})
    return pd.DataFrame(rows)


def _candidates(t: pd.DataFrame, macros: tuple[str, ...]) -> tuple[list[Candidate], dict]:
    """Each measured value combination of t (in t.groupby(macros)'s order) as a Candidate: its
    fastest job, the medians over its jobs; and its jobs' samples pooled, by _key."""
    ns, std = t["ns"].to_numpy(dtype=float), t["std_ns"].to_numpy(dtype=float)
    tag, node, threads, samples = (t[c].to_numpy() for c in ("tag", "node", "threads", "samples"))
    values = [t[m].to_numpy() for m in macros]
    cands, pooled_by = [], {}
    for at in _groups(t, list(macros)):
        fastest = at[int(np.nanargmin(ns[at]))]      # the first of the fastest, as idxmin
        parts = samples[at]
        pooled = None if any(s is None for s in parts) else tuple(x for s in parts for x in s)
        c = Candidate({m: int(v[at[0]]) for m, v in zip(macros, values)}, str(tag[fastest]), _median(ns[at]),
                      _median(std[at]), len(at), len(pooled) if pooled else 0,
                      summarize(pooled).iqr if pooled else None, int(threads[at].max()), str(node[fastest]))
        cands.append(c)
        pooled_by[_key(c)] = pooled
    return cands, pooled_by


def _evidence(pick: Candidate, ru: Candidate, samples: dict, t: pd.DataFrame) -> dict[str, Any]:
    """verdict, noise_source, interval and noise_ns of pick against runner-up (see the module docstring)."""
    a, b = samples[_key(pick)], samples[_key(ru)]
    jobs = t[t["tag"].isin(_tags(t, pick) + _tags(t, ru))]
    if a is not None and b is not None:
        c = compare(a, b, alpha=ALPHA)
        if c.verdict == "unknown":
            return {"verdict": "unknown", "noise_source": "unknown"}
        lo, hi = (v if v is not None and math.isfinite(v) else None for v in (c.ci_low, c.ci_high))
        return {"verdict": "faster" if c.verdict == "faster" else "tie",
                "noise_source": "runs" if (jobs["runs"] > 1).any() else "iterations",
                "margin_ci_low": lo, "margin_ci_high": hi, "confidence": c.confidence,
                "noise_ns": (hi - lo) / 2 * pick.ns if lo is not None and hi is not None else None}
    its = jobs["iterations"].dropna()
    known = its.min() >= MIN_SAMPLES_FOR_NOISE if len(its) else (pick.std_ns > 0 and ru.std_ns > 0)
    if not known:
        return {"verdict": "unknown", "noise_source": "unknown"}
    noise = NOISE_SIGMAS * math.sqrt(pick.std_ns ** 2 + ru.std_ns ** 2)
    margin = (ru.ns - pick.ns) / pick.ns if pick.ns > 0 else 0.0
    half = noise / pick.ns if pick.ns > 0 else math.inf
    return {"verdict": "faster" if (ru.ns - pick.ns) > noise else "tie", "noise_source": "iterations",
            "noise_ns": noise, "margin_ci_low": margin - half, "margin_ci_high": margin + half, "confidence": 0.95}


def _key(c: Candidate) -> tuple:
    return tuple(sorted(c.values.items()))


def _tags(t: pd.DataFrame, c: Candidate) -> list[str]:
    sel = np.logical_and.reduce([t[m] == v for m, v in c.values.items()])
    return list(t.loc[sel, "tag"])


Shapes = Callable[[Mapping[str, int]], tuple[ShapeBest, ...]]   # the pick's values -> its per-shape bests


def decide(t: pd.DataFrame, macros: tuple[str, ...], shapes: Shapes, baseline_ns: float | None = None,
           certification: Certification | None = None) -> Choice | None:
    """The group's Choice from its per-job table `t` (group_times' columns): every measured value
    combination a candidate, the fastest picked (or the race's pick, `certification`), the runner-up
    and the evidence; `shapes(pick)` gives the pick's per-shape bests; None for an empty table."""
    if t.empty:
        return None
    cands, samples = _candidates(t, macros)
    cands.sort(key=lambda c: (c.ns, c.threads))
    kernels = tuple(sorted({k for ks in t["kernels"] for k in ks}))
    nodes = tuple(sorted({n for n in t["node"] if n}))
    if certification is not None and certification.verdict != "unknown":
        return _certified(macros, kernels, cands, certification, baseline_ns, nodes, shapes(certification.pick))
    pick, ru = cands[0], (cands[1] if len(cands) > 1 else None)
    ev: dict[str, Any] = {}
    note = "only one value measured: nothing to compare"
    if ru is not None:
        ev = _evidence(pick, ru, samples, t)
        note = {"faster": "", "tie": TIE_NOTE, "unknown": UNKNOWN_NOTE}[ev["verdict"]]
    margin = (ru.ns - pick.ns) / pick.ns if ru is not None and pick.ns > 0 else None
    speedup = (baseline_ns / pick.ns) if baseline_ns and pick.ns > 0 else None
    if certification is not None:     # a race too short to say anything: the sweep's evidence stands
        short = (f"the race ran {certification.rounds} round(s) ({certification.stopped}): no evidence, the "
                 "sweep's pick stands; give it more time with certify.cap_s")
        note = f"{note}; {short}" if note else short
    return Choice(macros, kernels, pick.values, pick, ru, margin, ev.pop("noise_ns", None),
                  ev.get("verdict") == "faster", baseline_ns, speedup, tuple(cands), _with_nodes(note, nodes),
                  shapes=shapes(pick.values), nodes=nodes if len(nodes) > 1 else (), certification=certification,
                  **ev)


def _with_nodes(note: str, nodes: tuple[str, ...]) -> str:
    if len(nodes) < 2:
        return note
    mixed = (f"candidates measured on {len(nodes)} different GPUs ({', '.join(nodes[:3])}"
             f"{' ...' if len(nodes) > 3 else ''}): the margin mixes nodes; the race runs them on one")
    return f"{note}; {mixed}" if note else mixed


def _certified(macros: tuple[str, ...], kernels: tuple[str, ...], cands: list[Candidate], cert: Certification,
               baseline_ns: float | None, nodes: tuple[str, ...], shapes: tuple) -> Choice:
    """The Choice of a raced group: the race's pick and its evidence. When a tie was settled by the
    rule and the pick is not the race's leader, the runner-up is the leader, and the margin (leader /
    pick - 1, below 0) and its interval come from the leader's comparison with the pick."""
    by_values = {_key(c): c for c in cands}
    values_of = {e["tag"]: e["values"] for e in cert.entrants}

    def candidate(values: dict[str, int]) -> Candidate:
        """The candidate of these values; the default configuration's (declared, or the program's own),
        raced from the baseline job, is none of the sweep's: the baseline job's time stands for it."""
        found = by_values.get(tuple(sorted(values.items())))
        return found if found is not None else Candidate(dict(values), "default", float(baseline_ns or 0.0), 0.0, 1)
    pick = candidate(cert.pick)
    pick_tag = cert.tag_of(cert.pick)
    margin, lo, hi, rival = cert.margin, cert.ci_low, cert.ci_high, cert.runner_up
    if cert.leader and pick_tag != cert.leader and pick_tag in cert.comparisons:
        comp = cert.comparisons[pick_tag]             # the leader against the pick: pick / leader - 1
        def inverted(v: float | None) -> float | None:
            return None if v is None else 1 / (1 + v) - 1
        margin, lo, hi, rival = inverted(comp["margin"]), inverted(comp["ci_high"]), inverted(comp["ci_low"]), \
            values_of.get(cert.leader)
    ru = candidate(rival) if rival is not None else None
    noise = (hi - lo) / 2 * pick.ns if lo is not None and hi is not None else None
    if cert.certified:
        note = f"certified: faster than every other entrant in a race of {cert.rounds} rounds on one GPU"
    else:
        tied = "; ".join(values_words(t, ", ", names=True) for t in cert.tied)
        why = f"shown within {EQUIVALENCE:.0%} of each other" if cert.stopped == "equivalent" else cert.stopped
        note = f"race tie after {cert.rounds} rounds ({why}): tied {tied}; picked by rule: {cert.rule}"
    speedup = (baseline_ns / pick.ns) if baseline_ns and pick.ns > 0 else None
    return Choice(macros, kernels, dict(cert.pick), pick, ru, margin, noise, cert.certified, baseline_ns, speedup,
                  tuple(cands), note, noise_source="race", verdict=cert.verdict, margin_ci_low=lo, margin_ci_high=hi,
                  confidence=cert.confidence, certification=cert, shapes=shapes, nodes=nodes if len(nodes) > 1 else ())


