"""Pick each kernel's launch sizes from the collected measurements, with evidence.

Parameters are chosen in groups (the factorized strategy's groups: parameters
that share a tag, a kernel or a constraint). For each group, every measured
value combination gets the per-iteration time of the group's kernels (all their
launch shapes summed: seed 004's "total kernel time"); when a combination was
measured in several jobs (a grid varies the other groups around it) the median
over those jobs counts. The pick is the fastest combination; the evidence is:

    margin        (runner-up - best) / best
    noise_ns      2 * sqrt(std_best^2 + std_runner_up^2), from the run-to-run
                  spread of the per-iteration totals (std over timed iterations)
    beyond_noise  whether runner-up - best exceeds that noise

A pick within the noise is reported as such: any of the close values is as good.
With a baseline job (the target's own defaults) each pick also gets its
speed-up over the default launch sizes.
"""

from __future__ import annotations

import fnmatch
import math
from pathlib import Path
from typing import Iterable

import pandas as pd

from sweep import atomic
from sweep.profile import Measurement
from sweep.records import Best, Candidate, Choice, Confirmation
from sweep.space import Config, Space, check, make_config
from sweep.space import groups as parameter_groups

NOISE_SIGMAS = 2.0
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


def group_times(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...]) -> pd.DataFrame:
    """Per ok sweep job: the group's values and its kernels' per-iteration time and spread."""
    pats = patterns(space, macros)
    if measurements.empty:
        return pd.DataFrame(columns=["tag", *macros, "ns", "std_ns", "kernels"])
    m = measurements[(measurements["status"] == "ok") & (measurements["role"] == "sweep")]
    m = m[m["kernel"].map(lambda k: _matches(k, pats))]
    if m.empty:
        return pd.DataFrame(columns=["tag", *macros, "ns", "std_ns", "kernels"])
    agg = m.groupby("tag").agg(ns=("total_median_ns", "sum"), var=("total_std_ns", lambda s: float((s ** 2).sum())),
                               kernels=("kernel", lambda s: tuple(sorted(set(s)))))
    agg["std_ns"] = agg["var"].map(math.sqrt)
    values = m.groupby("tag")[list(macros)].first()
    return agg.drop(columns="var").join(values).reset_index()


def choose(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...],
           baseline_ns: float | None = None) -> Choice | None:
    t = group_times(space, measurements, macros)
    if t.empty:
        return None
    cands = []
    for vals, g in t.groupby(list(macros)):
        vals = vals if isinstance(vals, tuple) else (vals,)
        fastest = g.loc[g["ns"].idxmin()]
        cands.append(Candidate({m: int(v) for m, v in zip(macros, vals)}, str(fastest["tag"]), float(g["ns"].median()),
                               float(g["std_ns"].median()), len(g)))
    cands.sort(key=lambda c: c.ns)
    best, ru = cands[0], (cands[1] if len(cands) > 1 else None)
    margin = noise = None
    beyond = False
    note = ""
    if ru is not None:
        margin = (ru.ns - best.ns) / best.ns if best.ns > 0 else None
        noise = NOISE_SIGMAS * math.sqrt(best.std_ns ** 2 + ru.std_ns ** 2)
        beyond = (ru.ns - best.ns) > noise
        if not beyond:
            note = "within run-to-run noise of the runner-up: either is as good"
    else:
        note = "only one value measured: nothing to compare"
    kernels = tuple(sorted({k for ks in t["kernels"] for k in ks}))
    speedup = (baseline_ns / best.ns) if baseline_ns and best.ns > 0 else None
    return Choice(macros, kernels, best.values, best, ru, margin, noise, beyond, baseline_ns, speedup, tuple(cands), note)


def baseline_time(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], role: str = "baseline") -> float | None:
    """The group's kernels' per-iteration time in the job of `role` (default launch sizes, or the combined best)."""
    if measurements.empty:
        return None
    pats = patterns(space, macros)
    m = measurements[(measurements["role"] == role) & (measurements["status"] == "ok")]
    m = m[m["kernel"].map(lambda k: _matches(k, pats))]
    return float(m["total_median_ns"].sum()) if not m.empty else None


def select(space: Space, measurements: pd.DataFrame) -> Best:
    choices, unmeasured, chosen = [], [], {}
    for group in parameter_groups(space):
        macros = tuple(p.macro for p in group)
        c = choose(space, measurements, macros, baseline_time(space, measurements, macros))
        if c is None:
            unmeasured.extend(macros)
            for p in group:
                chosen[p.macro] = p.default if p.default is not None else p.values[0]
            continue
        choices.append(c)
        chosen.update(c.values)
    notes = []
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
            ru = f"  runner-up {rv} +{100 * c.margin:.1f}% ({'beyond' if c.beyond_noise else 'within'} noise)"
        sp = f"  {c.speedup_vs_default:.2f}x vs default" if c.speedup_vs_default else ""
        lines.append(f"{', '.join(c.kernels) or '-'}: {vals}  {c.best.ns / 1e3:.1f} us/iter{ru}{sp}")
    return lines
