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
was raced (sweep.decide.certify) takes its pick and evidence from the race
(noise_source "race"), unless the race ended before the first round at which it
could decide anything (Certification.decisive_from): then it said nothing, and
the sweep's own pick and evidence stand. Groups whose kernels run at several launch shapes get
each shape's best value and the pick's regret there (sweep.decide.shapes). With a
baseline job (the target's own defaults) each pick also gets its speed-up over
the default launch sizes; without one, over the sweep's own measurement of the
declared defaults where it has one (the learning strategy proposes them first).

A space with workloads is picked per workload and overall (sweep.decide.objective):
the overall pick, its candidates, evidence, speed-up and the confirmation are on
the weighted objective, the sum over workloads of weight x the group's time
there; each Choice also holds every workload's own pick and the overall pick's
regret there. The per-job tables and the evidence are sweep.decide.candidates'.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from sweep.core import atomic
from sweep.decide import objective
from sweep.decide.candidates import (ALPHA, NOISE_SIGMAS, TIE_NOTE, UNKNOWN_NOTE, decide, group_rows, kernel_groups,  # noqa: F401
                              group_times, patterns)
from sweep.records.evidence import Certification, WorkloadPick, verdict_words
from sweep.profile import Measurement
from sweep.records import OWN_SIZES, Best, Candidate, Choice, Confirmation, values_words
from sweep.decide.shapes import shape_bests
from sweep.space import Config, Space, check, groups, pick_config
from sweep.stats import compare
from sweep.stats.race import EQUIVALENCE
from sweep.space.workloads import weights

__all__ = ["Best", "Candidate", "Choice", "Confirmation", "select", "confirmation", "objective_ns", "write_best"]


def objective_ns(space: Space, measurements: Iterable[Measurement]) -> float:
    """What model-based search minimizes: the summed per-iteration time of every kernel
    the space's parameters govern (every launch shape counted); with workloads, each
    workload's weighted (the objective the picks are made by)."""
    governed = [m for m in measurements if any(p.governs(m.kernel) for p in space.parameters)]
    return objective.objective_of(governed, weights(space))


def group_objectives(space: Space, measurements: Iterable[Measurement]) -> dict[tuple[str, ...], float]:
    """objective_ns of each parameter group (sweep.space.groups: its swept macros) over the kernels
    its parameters (and those derived from them) govern; a group none of whose kernels was measured
    is left out (a model per group, sweep.plan.per_group)."""
    measured = list(measurements)
    out = {}
    for g in groups(space):
        macros = {p.macro for p in g}
        params = [p for p in space.parameters if p.macro in macros or p.derived and p.equals in macros]
        governed = [m for m in measured if any(p.governs(m.kernel) for p in params)]
        if governed:
            out[tuple(p.macro for p in g)] = objective.objective_of(governed, weights(space))
    return out


def choose(space: Space, measurements: pd.DataFrame, macros: tuple[str, ...], baseline_ns: float | None = None,
           certification: Certification | None = None) -> Choice | None:
    """A group's pick with its evidence (see the module docstring); over several workloads, the
    overall pick by the weighted objective with each workload's own (sweep.decide.objective)."""
    if space.workloads:
        c = objective.choose(space, measurements, macros, baseline_ns, certification)
    else:
        c = decide(group_times(space, measurements, macros), macros,
                   lambda pick: shape_bests(group_rows(space, measurements, macros), macros, pick),
                   baseline_ns, certification)
    return marked_default(space, measured_default(space, c)) if c is not None else None


def measured_default(space: Space, c: Choice) -> Choice:
    """With no baseline job measured, the speed-up over the sweep's own candidate of the declared
    defaults (the same configuration, measured as every other candidate was), where there is one."""
    defaults = space.declared_defaults(c.macros)
    if c.default_ns is not None or defaults is None:
        return c
    same = [x for x in c.candidates if x.values == defaults and x.ns > 0]
    if not same or c.best.ns <= 0:
        return c
    return replace(c, default_ns=same[0].ns, speedup_vs_default=same[0].ns / c.best.ns)


def marked_default(space: Space, c: Choice) -> Choice:
    """A pick that is the space's declared defaults, or the program's own launch sizes the race kept,
    is the default configuration's own launch sizes (the baseline job renders no macros; the race takes
    those defaults for it too): its speed-up
    against the default is 1 by identity, not the ratio of two jobs' times, which is only noise."""
    defaults = space.declared_defaults(c.macros)
    own = not c.values and c.certification is not None    # the race kept the program's own (OWN_SIZES)
    built_as_own = defaults is None and c.values and c.certification is not None and any(
        e.get("is_default") and e.get("values") == dict(c.values) for e in c.certification.entrants)
    if not own and not built_as_own and (defaults is None or defaults != {m: c.values.get(m) for m in c.macros}):
        return c
    if own:
        unset = [p.macro for p in space.parameters if p.macro in c.macros or p.derived and p.equals in c.macros]
        c = replace(c, note=f"{c.note}; the pick is {OWN_SIZES}: best/conf.cuh leaves {', '.join(unset)} unset, so "
                            "the program's own values apply")
    elif built_as_own:
        c = replace(c, note=f"{c.note}; the pick is {OWN_SIZES}: its build is byte-identical to the job 'default' "
                            "(conf.cuh without macros)")
    return replace(c, is_default=True, speedup_vs_default=1.0 if c.speedup_vs_default is not None else None)


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
    """The group's kernels' per-iteration time in the job of `role` (default launch sizes, or the combined
    best); with workloads, the weighted objective over them, as the picks' times are."""
    m = group_rows(space, measurements, macros, role)
    return objective.weighted_ns(m, weights(space)) if not m.empty else None


def select(space: Space, measurements: pd.DataFrame,
           certifications: Mapping[tuple[str, ...], Certification] | None = None) -> Best:
    """Each group's pick (see the module docstring); `certifications`: the races' outcomes by group macros."""
    measurements, gpu_note = same_gpu(measurements)
    choices, unmeasured, chosen = [], [], {}
    for group in kernel_groups(space, measurements):   # patterns matching one measured kernel: one group
        macros = tuple(p.macro for p in group)
        c = choose(space, measurements, macros, baseline_time(space, measurements, macros),
                   (certifications or {}).get(macros))
        if c is None:
            unmeasured.extend(macros)
            for p in group:
                chosen[p.macro] = p.default if p.default is not None else p.values[0]
            continue
        choices.append(against_default(space, measurements, c))
        chosen.update(c.values)
    notes = [gpu_note] if gpu_note else []
    notes.extend(n for c in choices if (n := defaults_won(c)))
    if unmeasured:
        pats = ", ".join(patterns(space, tuple(unmeasured)))
        notes.append(f"no launch of {pats} was measured for {', '.join(unmeasured)}: they keep "
                     "their default; check the kernel patterns against the profile, or that the run launches them")
    config: Config = pick_config(space, chosen)    # a group that kept the program's own sets no macro
    broken = check(space, config)
    if broken:
        notes.append(f"the combined pick breaks a constraint ({broken}); confirm it before use")
    return Best(space.name, tuple(choices), config.as_dict(), tuple(unmeasured), tuple(notes),
                tuple(w.to_dict() for w in space.workloads))


DEFAULTS_WON = "the program's own launch sizes (job 'default') ran these kernels"


def against_default(space: Space, measurements: pd.DataFrame, c: Choice) -> Choice:
    """c with default_verdict: its pick's samples against the baseline job's (the program's own launch
    sizes), where both kept samples and the pick is not the defaults themselves."""
    if c.is_default or not c.speedup_vs_default:
        return c
    theirs = objective.job_samples(space, measurements, c.macros, "baseline")   # first: most selects have none
    ours = objective.job_samples(space, measurements, c.macros, "sweep", c.values) if theirs else ()
    return replace(c, default_verdict=end_to_end_verdict(compare(ours, theirs).to_dict())) if ours else c


def defaults_won(c: Choice) -> str | None:
    """The note a group's pick carries when the program's own launch sizes (the baseline job) ran
    its kernels faster, beyond noise and by more than EQUIVALENCE: the space's values do not hold
    them (or they were never raced), so the sweep could not pick them. None where the race weighed
    the defaults itself (where the space declares none, the job 'default' races as the program's own)."""
    if c.default_verdict != "slower" or not c.speedup_vs_default or raced_the_default(c):
        return None
    return (f"{', '.join(c.kernels)}: {DEFAULTS_WON} "
            f"{100 * (1 / c.speedup_vs_default - 1):.1f}% faster than the pick, beyond noise: no value the space "
            f"gives {', '.join(c.macros)} beats them. Keep the program's own launch sizes for these kernels, or "
            "declare them among the values (each parameter's `default:`) so the sweep and its race weigh them")


def raced_the_default(c: Choice) -> bool:
    """Whether the group's race weighed the default launch sizes (an entrant of its declared defaults,
    or the job 'default' as the program's own): its paired verdict then stands over the unpaired one
    of the sweep's samples against the job 'default'."""
    return c.certification is not None and c.certification.verdict != "unknown" and any(
        e.get("is_default") for e in c.certification.entrants)


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
    against the default launch sizes (governed kernels per iteration, and the forward pass);
    with workloads, the totals are weighted, and each workload gets its own pair as well."""
    all_macros = tuple(p.macro for p in space.parameters)

    def total(role: str) -> float | None:
        return baseline_time(space, measurements, all_macros, role)

    def forward(role: str) -> float | None:
        if configs.empty or "forward_ms" not in configs:
            return None
        r = configs[(configs["role"] == role) & (configs["status"] == "ok")]["forward_ms"].dropna()
        return float(r.iloc[0]) if len(r) else None

    def per_workload() -> dict[str, dict[str, float | None]]:
        jobs = {role: group_rows(space, measurements, all_macros, role) for role in ("best", "baseline")}
        out = {}
        for w in space.workloads:
            ns = {}
            for role, rows in jobs.items():
                here = objective.only(rows, w.name)
                ns[role] = float(here["total_median_ns"].sum()) if not here.empty else None
            out[w.name] = {"best_ns": ns["best"], "default_ns": ns["baseline"],
                           "speedup_vs_default": ratio(ns["baseline"], ns["best"])}
        return out

    def evidence() -> dict | None:   # unpaired: the two jobs ran apart, so drift counts as noise here
        ours, theirs = (objective.job_samples(space, measurements, all_macros, role) for role in ("best", "baseline"))
        return compare(ours, theirs).to_dict() if ours and theirs else None

    sum_of_bests = sum(c.best.ns for c in best.choices)
    best_ns, default_ns = total("best"), total("baseline")
    best_ms, default_ms = forward("best"), forward("baseline")
    return Confirmation(workloads=per_workload(), vs_default=evidence(),
        sum_of_group_bests_ns=sum_of_bests, best_total_ns=best_ns, default_total_ns=default_ns,
        best_forward_ms=best_ms, default_forward_ms=default_ms,
        best_vs_sum_of_bests=ratio(best_ns, sum_of_bests), speedup_vs_default=ratio(default_ns, best_ns),
        forward_speedup_vs_default=ratio(default_ms, best_ms))


def end_to_end_verdict(vs_default: Mapping[str, Any] | None) -> str:
    """The two end-to-end jobs' samples (Confirmation.vs_default) on the combined pick against the
    defaults: "faster", "slower", "tie", "unknown" (sweep.stats.compare), or "equivalent" where the
    interval lies within EQUIVALENCE either way, as the race reads equivalence: a difference beyond
    noise but smaller than that (a long kernel both jobs share, drifting between them) decides
    nothing. "" where neither job kept samples."""
    ev = vs_default or {}
    lo, hi = ev.get("ci_low"), ev.get("ci_high")
    if ev.get("verdict") in ("faster", "slower", "tie") and lo is not None and hi is not None \
            and -EQUIVALENCE < lo and hi < EQUIVALENCE:
        return "equivalent"
    return ev.get("verdict") or ""


def end_to_end_words(vs_default: Mapping[str, Any] | None) -> str:
    """end_to_end_verdict in words, for the summary and the report."""
    return VERDICT_WORDS.get(end_to_end_verdict(vs_default), "")


VERDICT_WORDS = {"faster": "faster beyond noise", "slower": "SLOWER beyond noise", "tie": "within noise",
                 "equivalent": f"within {EQUIVALENCE:.0%}", "unknown": "noise unknown"}


def end_to_end_note(conf: Confirmation, best: Best | None = None) -> str | None:
    """The warning a combined pick that lost to the defaults end to end, beyond noise (and by more
    than EQUIVALENCE could hold), carries; none where a group's own note (defaults_won) already
    says which kernels the defaults run faster."""
    ev = conf.vs_default or {}
    if end_to_end_verdict(ev) != "slower" or best is not None and any(DEFAULTS_WON in n for n in best.notes):
        return None

    def slower(margin: float) -> str:   # margin = default / pick - 1 < 0: the pick is 1 / (1 + margin) - 1 slower
        return f"{100 * (1 / (1 + margin) - 1):.1f}%"
    lo, hi = ev.get("ci_low"), ev.get("ci_high")
    interval = f" ({ev['confidence']:.0%} interval {slower(hi)} to {slower(lo)})" if lo is not None and hi is not None \
        and lo > -1 else ""
    return (f"end to end, the combined pick ran {slower(ev['margin'])} slower than the default launch sizes, beyond "
            f"noise{interval}: the picks, chosen group by group in the sweep's jobs, interact (kernels sharing "
            "caches), or the GPU changed between the two jobs. best/conf.cuh holds the combined pick; keep the "
            "program's defaults until a second run confirms it")


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None where either is unknown or zero."""
    return a / b if a and b else None


def summary_lines(best: Best) -> list[str]:
    """The per-kernel picks as text lines, for the terminal."""
    lines = []
    for c in best.choices:
        vals = values_words(c.values, " ", names=True) if c.values else f"{OWN_SIZES} (unset in best/conf.cuh)"
        ru = ""
        if c.runner_up is not None and c.margin is not None:
            rv = values_words(c.runner_up.values)
            ru = f"  runner-up {rv} {100 * c.margin:+.1f}% ({verdict_words(c.verdict, c.noise_source)})"
        sp = "  the default" if c.is_default else \
            f"  {c.speedup_vs_default:.2f}x vs default{verdict_in_brackets(c.default_verdict)}" \
            if c.speedup_vs_default else ""
        lines.append(f"{', '.join(c.kernels) or '-'}: {vals}  {c.best.ns / 1e3:.1f} "
                     f"{'us weighted' if c.workloads else 'us/iter'}{ru}{sp}{race_words(c)}")
        lines.extend("  " + workload_line(w) for w in c.workloads)
    return lines


def verdict_in_brackets(verdict: str | None) -> str:
    """A pick's default_verdict in words, " (...)", for its summary line and report row ("": none)."""
    return f" ({w})" if (w := VERDICT_WORDS.get(verdict or "", "")) else ""


def race_words(c: Choice) -> str:
    """What the certification race says of a pick, for the summary line: the pick shown is
    always the one that applies (in best/conf.cuh), so a race too short to say anything
    names the sweep's pick as standing rather than the tie rule it did not apply."""
    cert = c.certification
    if cert is None:
        return f"  not raced: {c.not_raced}" if c.not_raced else ""
    if cert.verdict == "unknown":
        return f"  race: no evidence after {cert.rounds} round(s), the sweep's pick stands"
    if c.certified:
        return f"  certified ({cert.rounds} rounds)"
    tied = " | ".join(values_words(t) for t in cert.tied)
    shown = f" within {EQUIVALENCE:.0%}" if cert.stopped == "equivalent" else ""
    return f"  tie{shown}: {tied} (picked by rule: {cert.rule})"


def workload_line(w: WorkloadPick) -> str:
    """One workload's own pick and the overall pick's regret there, for the terminal."""
    vals = values_words(w.values)
    regret = "the overall pick is its own" if w.regret == 0 else \
        "overall pick not measured there" if w.regret is None else f"overall pick {100 * w.regret:+.1f}% here"
    return f"{w.workload} (weight {w.weight:g}): {vals}  {w.ns / 1e3:.1f} us/iter; {regret}"
