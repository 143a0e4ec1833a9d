"""Certify each group's pick after the sweep: plan the race, run it as one job, read its outcome.

    plan(space, best, collected, sweep_dir)   the RacePlan: per group with at least two
                                              candidates, its `certify.top` fastest (by the
                                              sweep's medians) and the default configuration
    run(space, sw, best, collected)           render jobs/<sweep>/_races/<plan digest>/ and dispatch
                                              it through the sweep's executor (one job, one GPU)
    recorded(space, sweep_dir, best, c)       the outcome of the race already run for this
                                              very plan (collect reads it; nothing runs)

The outcome becomes each group's Certification (sweep.records.evidence), which select
takes in place of the sweep's own evidence: "certified" when the pick beat every
other entrant beyond the noise, else a tie with its tied set and the pick by the
documented rule (the default if it is tied, else the fewest threads per block;
sweep.stats.race.tie_break).

The default entrant: the candidate whose values are the group's declared
defaults, else the baseline job (the target's own launch sizes), which then
runs before the race. Where the space declares no defaults for a group of two
candidates or more, the baseline job races as the program's own launch sizes
(values {}, records.OWN_SIZES): the program may size a kernel in a way the
space's values cannot express (the engine's 32x4x1 encoder block, in a space of
cubes), and a pick slower than what the program already does is no pick. When
it wins, or ties (the rule keeps the default), best/conf.cuh leaves the group's
macros unset. Where one candidate's build is byte-identical to the baseline job's (its
every object has the object cache's key of the baseline's: its conf.cuh changed no
preprocessed line), that candidate is the program's own, named: it races as the
default entrant in place of the baseline job. Cost and cap: the race runs by default when what certifying
costs (race_cost.cost_s: the rounds up to the first round at which it could decide
anything, stats.Race.decisive_looks: 9 rounds with two to four entrants at the default
30 rounds) is at most its cap, max(certify.budget_share (20%) of the sweep's GPU
seconds (verify + profile of its ok jobs), certify.cap_s (60 s)), shared by all
groups, and it may hold the GPU up to the cap; certify.budget_s, when set, is the cap
exactly. Above the cap it races nothing and says what it would cost and which cap_s
allows it. A race stopped before that round has no evidence: select keeps the sweep's
own pick and evidence, and says so. Every group's summary line says certified, tie
(the tied set) or why it was not raced (`unraced`, Choice.not_raced).

How the rounds run: in lockstep (`in_lockstep`: certify.lockstep, and every
entrant's job sampled per iteration) a fresh process of each entrant's own job a
round, taking turns (sweep.node.lockstep); else a run of each needed program a round,
the groups together on combined configurations (`wants_combined`,
sweep.decide.race_combined). What either
costs, and so what a budget buys: sweep.decide.race_cost.

With workloads the race runs on the weighted objective the overall pick was made
by: a round runs every workload of every needed job once, and an entrant's sample
is the sum over workloads of weight x the group's time (RacePlan.weights). It
certifies the overall pick (best/conf.cuh's), and costs a round as many runs per
job as there are workloads; the per-workload picks keep the sweep's evidence.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

import pandas as pd

from sweep import dispatch as executors
from sweep.decide import collect as collect_mod
from sweep.node import gpus, render
from sweep.decide.collect import Collected
from sweep.records.evidence import Certification
from sweep.dispatch.progress import Progress
from sweep.node.race import OUTCOME, Lane, RacePlan, read_outcome
from sweep.decide import race_parts
from sweep.decide.race_combined import (ENTRANT_ROLE, combined, find_entrants, run_entrants, shared,  # noqa: F401
                                        unshared, wants_combined)
from sweep.decide.race_cost import cost_s, plan_first_round, side_by_side_s
from sweep.records import Best, Choice, JobSettings
from sweep.decide.select import group_rows, patterns
from sweep.space import Config, Space
from sweep.space.workloads import weights
from sweep.stats import Entrant, contenders



class Sweep(Protocol):
    """What a race needs of the sweep being run (sweep.pipeline.driver.Sweep, which calls this
    module): where its folder is, what its jobs are rendered with, and a way to run jobs."""

    sweep_dir: Path
    commit: str
    values: dict[str, str]

    def settings(self) -> JobSettings: ...

    def render(self, config: Config | None, tag: str, role: str = "sweep",
               partition: str = "") -> executors.PendingJob: ...

    def dispatch(self, jobs: list[executors.PendingJob], progress: Progress,
                 on_result: Callable[..., Any]) -> None: ...

    def run_pending(self, jobs: list[executors.PendingJob], label: str, say: str) -> None: ...

    def gpus_at_once(self) -> int: ...

    def one_node(self) -> bool: ...      # its side-by-side jobs share one node (its CUDA start-ups)

RACES = "_races"          # jobs/<sweep>/_races/<plan digest>/: one folder per race plan (a job of its own)


def sweep_gpu_s(configs: pd.DataFrame) -> float:
    """The GPU-seconds the sweep's ok jobs cost: their shares of the measuring phase's wall time
    (collect's gpu_s; in overlap mode the jobs shared the GPU), else verify + profile."""
    if configs.empty:
        return 0.0
    ok = configs[(configs["status"] == "ok") & (configs["role"] == "sweep")]
    if "gpu_s" in ok:
        return float(ok["gpu_s"].fillna(0).sum())
    return float(sum(ok[c].fillna(0).sum() for c in ("verify_s", "profile_s") if c in ok))


def budget(space: Space, configs: pd.DataFrame) -> float:
    """The race's cap, the seconds it may hold the GPU (0.1 s steps): certify.budget_s when set,
    else the larger of budget_share of the sweep's GPU seconds and certify.cap_s."""
    c = space.certify
    seconds = c.budget_s if c.budget_s > 0 else max(c.budget_share * sweep_gpu_s(configs), c.cap_s)
    return round(seconds, 1)


def over_cap(space: Space, p: RacePlan, cost: float) -> str:
    """"" when a race of what certifying costs (`cost` seconds, race_cost.cost_s) fits its cap
    (p.budget_s, `budget`); else what it would cost, and the setting that allows it."""
    if cost <= p.budget_s:
        return ""
    setting = "budget_s" if space.certify.budget_s > 0 else "cap_s"
    return (f"would cost ~{cost:.0f} s, over the {p.budget_s:.0f} s cap; certify: {{{setting}: "
            f"{math.ceil(cost * 1.1)}}} allows it")


NO_CANDIDATES = "a single candidate: nothing to race"


def unraced(space: Space, best: Best, c: Collected, certified: Mapping[tuple[str, ...], Certification],
            why: str) -> Best:
    """best with each group that has no certification saying why (Choice.not_raced): a single
    candidate, else `why` (the race over its cap, switched off, not asked for, failed)."""
    choices = []
    for ch in best.choices:
        reason = "" if ch.macros in certified else why if lane(space, ch, c) is not None else NO_CANDIDATES
        choices.append(dataclasses.replace(ch, not_raced=reason))
    return dataclasses.replace(best, choices=tuple(choices))


def in_lockstep(space: Space, c: Collected, tags: list[str]) -> bool:
    """Whether a race of these jobs goes in lockstep: certify.lockstep, and every one of them took
    its samples from the iterations of a run (its program times NVTX iterations; a program of
    fewer than 3 has nothing to take turns at)."""
    cf = c.configs
    if not space.certify.lockstep or cf.empty or "noise_source" not in cf:
        return False
    source = cf.drop_duplicates("tag").set_index("tag")["noise_source"]
    return all(source.get(t) == "iterations" for t in tags)


def _baseline(space: Space, c: Collected, macros: tuple[str, ...]) -> Entrant | None:
    """The baseline job as a group's default entrant, when it was measured (it ran the group's
    kernels: a program that cannot build without the macros has none)."""
    rows = group_rows(space, c.measurements, macros, role="baseline")
    if rows.empty:
        return None
    tags = set(rows["tag"]) if "tag" in rows else set()
    # the job as measured: `default`, or `default__<partition>` in a sweep of several GPU models
    job = min(tags) if len(tags) == 1 else render.BASELINE_TAG
    return Entrant(job, max(1, int(rows["threads_per_block"].max())), True)


def built_as_own(c: Collected, candidates: Sequence[Any]) -> str | None:
    """The tag of the candidate whose build is byte-identical to a measured baseline job's (the same
    object cache key for every object: sweep.decide.collect.build_digest), so its values are the
    program's own; None where none is, or the builds recorded no objects (a CMake build, macros
    passed as -D flags, which are part of each key)."""
    cf = c.configs
    if cf.empty or not {"build_digest", "role", "status", "tag"} <= set(cf.columns):
        return None
    own = set(cf.loc[(cf["role"] == "baseline") & (cf["status"] == "ok"), "build_digest"].dropna()) - {""}
    digests = cf.drop_duplicates("tag").set_index("tag")["build_digest"]
    return next((x.tag for x in candidates if x.tag in digests.index and digests[x.tag] in own), None)


def lane(space: Space, choice: Choice, c: Collected) -> Lane | None:
    """A group's race, or None when it has fewer than two entrants. Its default entrant: the
    candidate of the declared defaults, else the baseline job with those defaults' values, else (no
    defaults declared, two candidates or more) the candidate built byte-identical to the baseline
    job, else the baseline job as the program's own ({})."""
    defaults = space.declared_defaults(choice.macros)
    own = built_as_own(c, choice.candidates) if defaults is None and len(choice.candidates) > 1 else None
    entrants = [Entrant(x.tag, max(1, x.threads), defaults is not None and x.values == defaults or x.tag == own)
                for x in choice.candidates]
    medians = {x.tag: x.ns for x in choice.candidates}
    chosen = list(contenders(entrants, medians, space.certify.top))
    values = {x.tag: dict(x.values) for x in choice.candidates}
    if (defaults is not None or len(choice.candidates) > 1) and not any(e.is_default for e in chosen):
        base = _baseline(space, c, choice.macros)
        if base is not None:
            chosen.append(base)
            values[base.id] = defaults if defaults is not None else {}
    if len(chosen) < 2:
        return None
    return Lane(choice.macros, patterns(space, choice.macros), tuple(chosen), {e.id: values[e.id] for e in chosen})


def plan(space: Space, best: Best, c: Collected, sweep_dir: Path) -> RacePlan | None:
    """The race of every group with two entrants or more (None: nothing to race)."""
    lanes = tuple(x for x in (lane(space, ch, c) for ch in best.choices) if x is not None)
    if not lanes:
        return None
    hashes = {}
    by_tag = c.configs.set_index("tag")["config_hash"].to_dict() if "config_hash" in c.configs else {}
    tags = list(dict.fromkeys(e.id for x in lanes for e in x.entrants))
    for t in tags:
        hashes[t] = str(by_tag.get(t, ""))
    return RacePlan(lanes, {t: str(Path(sweep_dir) / t) for t in tags}, hashes, budget(space, c.configs),
                    space.certify.max_rounds, weights=weights(space) if space.workloads else {},
                    lockstep=in_lockstep(space, c, tags), turns=space.certify.turns,
                    processes=space.certify.processes, overlap=gpus.overlap_wanted(space))


def needs_baseline(space: Space, best: Best) -> bool:
    """Some group of two candidates or more races the baseline job: its declared defaults are not
    among its measured candidates (the baseline job stands in), or it declares none (the baseline
    job races as the program's own launch sizes)."""
    for ch in best.choices:
        d = space.declared_defaults(ch.macros)
        if len(ch.candidates) > 1 and (d is None or not any(x.values == d for x in ch.candidates)):
            return True
    return False


def certifications(p: RacePlan, out: Mapping[str, Any]) -> dict[tuple[str, ...], Certification]:
    """The outcome's results as each group's Certification."""
    node = out.get("node") or {}
    certs = {}
    for x, entry in zip(p.lanes, out["lanes"]):
        r, v = entry["result"], x.values
        medians = r.get("medians", {})
        certs[x.macros] = Certification(
            status=r["status"], pick=v[r["pick"]], rule=r["rule"], tied=tuple(v[t] for t in r["tied"]),
            runner_up=v.get(r["runner_up"]), margin=r["margin"], ci_low=_finite(r["ci_low"]),
            ci_high=_finite(r["ci_high"]), confidence=r["confidence"], rounds=r["rounds"], elapsed_s=r["elapsed_s"],
            stopped=r["stopped"],
            entrants=tuple({"tag": e.id, "values": v[e.id], "threads": e.threads, "is_default": e.is_default,
                            "median_ns": medians.get(e.id)} for e in x.entrants),
            host=str(node.get("host", "")), gpu_uuid=str(node.get("gpu_uuid", "") or ""),
            throttled_runs=int(out.get("throttled_runs", 0)), leader=r["leader"],
            comparisons={k: {"margin": cmp["margin"], "ci_low": _finite(cmp["ci_low"]), "ci_high": _finite(cmp["ci_high"]),
                             "verdict": cmp["verdict"]} for k, cmp in r.get("comparisons", {}).items()},
            decisive_from=int(r.get("decisive", 3)))
    return certs


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def race_dir(sweep_dir: Path, p: RacePlan) -> Path:
    return Path(sweep_dir) / RACES / p.digest()


def latest_outcome(sweep_dir: Path) -> dict[str, Any] | None:
    """The newest race.json of a sweep (None when it never raced)."""
    found = sorted(Path(sweep_dir).glob(f"{RACES}/*/{OUTCOME}"), key=lambda f: f.stat().st_mtime)
    return read_outcome(found[-1].parent) if found else None


def recorded(space: Space, sweep_dir: Path, best: Best, c: Collected) -> dict[tuple[str, ...], Certification]:
    """The certifications of a race already run for this very plan ({} when there is none)."""
    p = plan(space, best, c, sweep_dir)
    p = shared(space, best, c, sweep_dir, p) or p
    found = race_parts.recorded_parts(p, lambda x: race_dir(sweep_dir, x), part_first_look(c)) if p is not None else []
    return {k: v for part, out in found for k, v in certifications(part, out).items()}


def part_first_look(c: Collected) -> Callable[[RacePlan], float]:
    """A split race's part's estimated seconds to its first decisive look (its own jobs a round)."""
    return lambda part: cost_s(part, c, len(part.tags()))


def side_by_side(c: Collected) -> Callable[[list[RacePlan]], float | None]:
    """Races at once on GPUs of one node: seconds until the last reaches its first decisive look (on
    Slurm the parts may run on nodes of their own, whose start-ups do not queue behind each other's)."""
    return lambda plans: side_by_side_s(plans, c)


def run(space: Space, sw: Sweep, best: Best, c: Collected, partition: str = "") \
        -> tuple[dict[tuple[str, ...], Certification], str]:
    """Race the groups' top candidates on one GPU (one job through the sweep's executor, on
    `partition` when the sweep spans GPU models): the certifications, and why there are none
    ("" when there was nothing to race; said on stderr: the sweep's picks stand)."""
    p = plan(space, best, c, sw.sweep_dir)
    if p is None:
        return {}, ""
    ranks = combined(space, best, p) if wants_combined(space, p) else None
    cost = cost_s(p, c, len(ranks) if ranks else len(p.tags()))
    over = over_cap(space, p, cost)
    if over and not recorded(space, sw.sweep_dir, best, c):
        how = " in lockstep" if p.lockstep else ""
        first = plan_first_round(p)
        print(f"certify: not racing: certifying takes {first} rounds{how}, {over}; the sweep's picks stand "
              "uncertified", file=sys.stderr)
        return {}, over
    if ranks:
        run_entrants(space, sw, ranks, find_entrants(space, ranks, c, sw.sweep_dir), partition)
        swept = set(c.configs["tag"])   # the sweep jobs `c` kept (those of the space as it is now)
        c = collect_mod.collect(sw.sweep_dir, keep=lambda cfg: cfg.role != "sweep" or cfg.tag in swept)
        p = shared(space, best, c, sw.sweep_dir, p) or unshared(p, ranks)
    races = race_parts.parts(p, sw.gpus_at_once(), combined=bool(ranks), first_look_s=part_first_look(c),
                             side_by_side_s=side_by_side(c) if sw.one_node() else None)
    ran = race_parts.run_parts(space, sw, races, lambda x: race_dir(sw.sweep_dir, x), cost, partition)
    failed = [why for _, out, why in ran if out is None]
    if failed:
        print(f"warning: the certification race failed ({failed[0]}); the sweep's own evidence stands", file=sys.stderr)
        return {}, f"the race failed ({failed[0][:200]})"
    return {k: v for part, out, _ in ran for k, v in certifications(part, out).items()}, ""
