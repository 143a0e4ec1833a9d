"""Pick each kernel's launch sizes from the collected measurements, with evidence.

Parameters are chosen in groups (the factorized strategy's groups: parameters
that share a tag, a kernel or a constraint). For each group, every measured
value combination (a candidate) gets the per-iteration time of the group's
kernels, all their launch shapes summed (seed 004's "total kernel time"): per
job the median over its per-iteration samples, and where a combination was
measured in several jobs (a grid varies the other groups around it) the median
over those jobs. The pick is the fastest candidate; the evidence is:

    margin        runner-up / pick - 1 (medians)
    verdict       sweep.stats.compare on the two candidates' samples (their jobs'
                  per-iteration totals, pooled, repeated runs included): the
                  rank-based 95% interval of the margin; "faster" when it lies
                  above 0, "tie" when it holds 0, "unknown" with fewer than 3
                  samples a side. beyond_noise is verdict == "faster": noise is
                  measured, never assumed, and unknown noise is never beyond it.
    noise_source  "iterations" (one run's timed iterations), "runs" (several
                  runs pooled) or "unknown"

A table collected before the samples were kept (no `iter_total_ns` column, as
in tests/data) is weighed by the earlier rule, runner-up - pick against
2 * sqrt(std_pick^2 + std_runner_up^2) over iterations, and only where every
job timed at least 3 iterations (or, with no count, showed a spread): one
iteration's spread of zero is no evidence.

Only one GPU model is compared: with measurements from several, the model with
the most jobs is used and the others are named in a note. A pick whose
candidates were measured on different GPUs says so (Choice.nodes). A group that
was raced (sweep.certify) takes its pick and evidence from the race
(noise_source "race"), unless the race ended before 3 rounds: then it said
nothing, and the sweep's own pick and evidence stand. Groups whose kernels run at several launch shapes get
each shape's best value and the pick's regret there (sweep.shapes). With a
baseline job (the target's own defaults) each pick also gets its speed-up over
the default launch sizes.
"""

from __future__ import annotations

import fnmatch
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from sweep import atomic
from sweep.evidence import Certification
from sweep.profile import Measurement
from sweep.records import Best, Candidate, Choice, Confirmation
from sweep.shapes import shape_bests
from sweep.space import Config, Space, check, make_config
from sweep.space import groups as parameter_groups
from sweep.stats import MIN_SAMPLES_FOR_NOISE, compare, summarize

NOISE_SIGMAS = 2.0
ALPHA = 0.05
EVIDENCE_WORDS = {"faster": "beyond noise", "tie": "within noise", "unknown": "noise unknown"}
TIE_NOTE = "within run-to-run noise of the runner-up: either is as good"
UNKNOWN_NOTE = ("noise unknown: fewer than 3 samples per candidate (one timed iteration per run and no repeats), "
                "so the margin is no evidence; set run.repeats, or time more iterations")
__all__ = ["Best", "Candidate", "Choice", "Confirmation", "select", "confirmation", "objective_ns", "write_best"]


def objective_ns(space: Space, measurements: Iterable[Measurement]) -> float:
    """What model-based search minimizes: the summed per-iteration time of every kernel
    the space's parameters govern (every launch shape counted)."""
    return sum(m.total_median_ns for m in measurements if any(p.governs(m.kernel) for p in space.parameters))


def patterns(space: Space, macros: tuple[str, ...]) -> tuple[str, ...]:
    ps: list[str] = []
    for p in space.parameters:
        if p.macro in macros or p.equals in macros:
            ps.extend(k for k in p.kernels if k not in ps)
    return tuple(ps)


def _matches(kernel: str, pats: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(kernel, p) for p in pats)


def group_rows(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], role: str = "sweep") -> pd.DataFrame:
    """The ok measurement rows of `role` for the group's kernels."""
    if measurements.empty:
        return measurements
    m = measurements[(measurements["status"] == "ok") & (measurements["role"] == role)]
    pats = patterns(space, macros)
    return m[m["kernel"].map(lambda k: _matches(k, pats))]


def job_samples(rows: pd.DataFrame) -> tuple[float, ...] | None:
    """One job's per-iteration samples of the group: its shapes summed iteration by iteration
    (None when the table has no samples or the shapes' counts differ)."""
    if "iter_total_ns" not in rows:
        return None
    lists = [np.asarray(v, dtype=float) for v in rows["iter_total_ns"] if v is not None and not _is_nan(v)]
    if len(lists) != len(rows) or not lists or len({x.size for x in lists}) != 1 or lists[0].size == 0:
        return None
    return tuple(float(x) for x in np.sum(lists, axis=0))


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _column(g: pd.DataFrame, name: str, default: Any, how: Any) -> Any:
    """how (min or max) of a column's known values, or `default` where the table lacks them."""
    known = g[name].dropna() if name in g else ()
    return int(how(known)) if len(known) else default


def _node(r: pd.Series) -> str:
    for key in ("gpu_uuid", "host"):
        v = r.get(key)
        if isinstance(v, str) and v:
            return v
    return ""


COLUMNS = ["tag", "ns", "std_ns", "kernels", "samples", "runs", "iterations", "threads", "node"]


def group_times(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...]) -> pd.DataFrame:
    """Per ok sweep job: the group's values, its kernels' per-iteration time (ns), spread,
    samples, runs pooled, iterations, threads per block and node."""
    m = group_rows(space, measurements, macros)
    if m.empty:
        return pd.DataFrame(columns=[*COLUMNS, *macros])
    rows = []
    for tag, g in m.groupby("tag", sort=True):
        samples = job_samples(g)
        rows.append({
            "tag": tag, "ns": float(np.median(samples)) if samples else float(g["total_median_ns"].sum()),
            "std_ns": math.sqrt(float((g["total_std_ns"] ** 2).sum())), "kernels": tuple(sorted(set(g["kernel"]))),
            "samples": samples, "runs": int(_column(g, "runs", 1, max)),
            "iterations": _column(g, "iterations", None, min),
            "threads": int(_column(g, "threads_per_block", 0, max)),
            "node": _node(g.iloc[0]), **{k: g[k].iloc[0] for k in macros}})
    return pd.DataFrame(rows)


def _candidate(macros: tuple[str, ...], vals: tuple, g: pd.DataFrame) -> tuple[Candidate, tuple[float, ...] | None]:
    fastest = g.loc[g["ns"].idxmin()]
    pooled = None if any(s is None for s in g["samples"]) else tuple(x for s in g["samples"] for x in s)
    iqr = summarize(pooled).iqr if pooled else None
    c = Candidate({m: int(v) for m, v in zip(macros, vals)}, str(fastest["tag"]), float(g["ns"].median()),
                  float(g["std_ns"].median()), len(g), len(pooled) if pooled else 0, iqr, int(g["threads"].max()),
                  str(fastest["node"]))
    return c, pooled


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


def choose(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], baseline_ns: float | None = None,
           certification: Certification | None = None) -> Choice | None:
    t = group_times(space, measurements, macros)
    if t.empty:
        return None
    cands, samples = [], {}
    for vals, g in t.groupby(list(macros)):
        c, pooled = _candidate(macros, vals if isinstance(vals, tuple) else (vals,), g)
        cands.append(c)
        samples[_key(c)] = pooled
    cands.sort(key=lambda c: (c.ns, c.threads))
    kernels = tuple(sorted({k for ks in t["kernels"] for k in ks}))
    nodes = tuple(sorted({n for n in t["node"] if n}))
    if certification is not None and certification.verdict != "unknown":
        return _certified(macros, kernels, cands, certification, baseline_ns, nodes,
                          shape_bests(group_rows(space, measurements, macros), macros, certification.pick))
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
                 "sweep's pick stands; give it more time with certify.budget_s")
        note = f"{note}; {short}" if note else short
    return Choice(macros, kernels, pick.values, pick, ru, margin, ev.pop("noise_ns", None),
                  ev.get("verdict") == "faster", baseline_ns, speedup, tuple(cands), _with_nodes(note, nodes),
                  shapes=shape_bests(group_rows(space, measurements, macros), macros, pick.values),
                  nodes=nodes if len(nodes) > 1 else (), certification=certification, **ev)


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
    pick = by_values.get(tuple(sorted(cert.pick.items())))
    if pick is None:   # the default configuration, raced from the baseline job
        pick = Candidate(dict(cert.pick), "default", float(baseline_ns or 0.0), 0.0, 1)
    pick_tag = cert.tag_of(cert.pick)
    margin, lo, hi, rival = cert.margin, cert.ci_low, cert.ci_high, cert.runner_up
    if cert.leader and pick_tag != cert.leader and pick_tag in cert.comparisons:
        comp = cert.comparisons[pick_tag]             # the leader against the pick: pick / leader - 1
        def inverted(v: float | None) -> float | None:
            return None if v is None else 1 / (1 + v) - 1
        margin, lo, hi, rival = inverted(comp["margin"]), inverted(comp["ci_high"]), inverted(comp["ci_low"]), \
            values_of.get(cert.leader)
    ru = by_values.get(tuple(sorted(rival.items()))) if rival else None
    noise = (hi - lo) / 2 * pick.ns if lo is not None and hi is not None else None
    if cert.certified:
        note = f"certified: faster than every other entrant in a race of {cert.rounds} rounds on one GPU"
    else:
        tied = "; ".join(", ".join(f"{k}={v}" for k, v in t.items()) for t in cert.tied)
        note = f"race tie after {cert.rounds} rounds ({cert.stopped}): tied {tied}; picked by rule: {cert.rule}"
    speedup = (baseline_ns / pick.ns) if baseline_ns and pick.ns > 0 else None
    return Choice(macros, kernels, dict(cert.pick), pick, ru, margin, noise, cert.certified, baseline_ns, speedup,
                  tuple(cands), note, noise_source="race", verdict=cert.verdict, margin_ci_low=lo, margin_ci_high=hi,
                  confidence=cert.confidence, certification=cert, shapes=shapes, nodes=nodes if len(nodes) > 1 else ())


def same_gpu(measurements: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Only the GPU model with the most sweep jobs (and a note naming the others left out)."""
    if measurements.empty or "gpu" not in measurements:
        return measurements, ""
    ok = measurements[(measurements["status"] == "ok") & (measurements["role"] == "sweep")]
    models = ok.assign(gpu=ok["gpu"].fillna("")).groupby("gpu")["tag"].nunique()
    models = models[[bool(str(k)) for k in models.index]]
    if len(models) < 2:
        return measurements, ""
    keep = models.sort_values(ascending=False).index[0]
    others = [f"{k} ({n} jobs)" for k, n in models.items() if k != keep]
    note = (f"measurements of {len(models)} GPU models: only {keep} ({models[keep]} jobs) compared; left out: "
            f"{', '.join(others)}; sweep each GPU model separately (--name) and compare them with `compare`")
    return measurements[measurements["gpu"].fillna("").isin([keep, ""])], note


def baseline_time(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], role: str = "baseline") -> float | None:
    """The group's kernels' per-iteration time in the job of `role` (default launch sizes, or the combined best)."""
    if measurements.empty:
        return None
    pats = patterns(space, macros)
    m = measurements[(measurements["role"] == role) & (measurements["status"] == "ok")]
    m = m[m["kernel"].map(lambda k: _matches(k, pats))]
    return float(m["total_median_ns"].sum()) if not m.empty else None


def select(space: Space, measurements: pd.DataFrame,
           certifications: Mapping[tuple[str, ...], Certification] | None = None) -> Best:
    """Each group's pick (see the module docstring); `certifications`: the races' outcomes by group macros."""
    measurements, gpu_note = same_gpu(measurements)
    choices, unmeasured, chosen = [], [], {}
    for group in parameter_groups(space):
        macros = tuple(p.macro for p in group)
        c = choose(space, measurements, macros, baseline_time(space, measurements, macros),
                   (certifications or {}).get(macros))
        if c is None:
            unmeasured.extend(macros)
            for p in group:
                chosen[p.macro] = p.default if p.default is not None else p.values[0]
            continue
        choices.append(c)
        chosen.update(c.values)
    notes = [gpu_note] if gpu_note else []
    if unmeasured:
        pats = ", ".join(patterns(space, tuple(unmeasured)))
        notes.append(f"no launch of {pats} was measured for {', '.join(unmeasured)}: they keep "
                     "their default; check the kernel patterns against the profile, or that the run launches them")
    config: Config = make_config(space, chosen)
    broken = check(space, config)
    if broken:
        notes.append(f"the combined pick breaks a constraint ({broken}); confirm it before use")
    return Best(space.name, tuple(choices), config.as_dict(), tuple(unmeasured), tuple(notes))


def write_best(best: Best, results_dir: Path, conf_text: str) -> tuple[Path, Path]:
    """results_dir/best.json and results_dir/best/conf.cuh (atomic)."""
    results_dir = Path(results_dir)
    j = results_dir / "best.json"
    atomic.write_json(j, best.to_dict())
    conf = results_dir / "best" / "conf.cuh"
    atomic.write_text(conf, conf_text)
    return j, conf


def confirmation(space: Space, measurements: pd.DataFrame, configs: pd.DataFrame, best: Best) -> Confirmation:
    """End to end: the combined best's total against the sum of the per-group bests and
    against the default launch sizes (governed kernels per iteration, and the forward pass)."""
    all_macros = tuple(p.macro for p in space.parameters)

    def total(role: str) -> float | None:
        return baseline_time(space, measurements, all_macros, role)

    def forward(role: str) -> float | None:
        if configs.empty or "forward_ms" not in configs:
            return None
        r = configs[(configs["role"] == role) & (configs["status"] == "ok")]["forward_ms"].dropna()
        return float(r.iloc[0]) if len(r) else None

    sum_of_bests = sum(c.best.ns for c in best.choices)
    best_ns, default_ns = total("best"), total("baseline")
    best_ms, default_ms = forward("best"), forward("baseline")
    return Confirmation(
        sum_of_group_bests_ns=sum_of_bests, best_total_ns=best_ns, default_total_ns=default_ns,
        best_forward_ms=best_ms, default_forward_ms=default_ms,
        best_vs_sum_of_bests=best_ns / sum_of_bests if best_ns and sum_of_bests else None,
        speedup_vs_default=default_ns / best_ns if best_ns and default_ns else None,
        forward_speedup_vs_default=default_ms / best_ms if best_ms and default_ms else None)


def summary_lines(best: Best) -> list[str]:
    """The per-kernel picks as text lines, for the terminal."""
    lines = []
    for c in best.choices:
        vals = " ".join(f"{k}={v}" for k, v in c.values.items())
        ru = ""
        if c.runner_up is not None and c.margin is not None:
            rv = ",".join(str(v) for v in c.runner_up.values.values())
            ru = f"  runner-up {rv} {100 * c.margin:+.1f}% ({EVIDENCE_WORDS.get(c.verdict, c.verdict)})"
        sp = f"  {c.speedup_vs_default:.2f}x vs default" if c.speedup_vs_default else ""
        lines.append(f"{', '.join(c.kernels) or '-'}: {vals}  {c.best.ns / 1e3:.1f} us/iter{ru}{sp}{race_words(c)}")
    return lines


def race_words(c: Choice) -> str:
    """What the certification race says of a pick, for the summary line: the pick shown is
    always the one that applies (in best/conf.cuh), so a race too short to say anything
    names the sweep's pick as standing rather than the tie rule it did not apply."""
    cert = c.certification
    if cert is None:
        return ""
    if cert.verdict == "unknown":
        return f"  race: no evidence after {cert.rounds} round(s), the sweep's pick stands"
    if c.certified:
        return f"  certified ({cert.rounds} rounds)"
    return f"  race tie ({len(cert.tied)} tied, picked by rule: {cert.rule})"
