"""The certification race on the GPU: the candidates' already-built programs, in interleaved rounds.

    python -m sweep.node.job jobs/<sweep>/_races/<plan>   (what an executor runs: Job.run hands a job
                                               of role "race" to `run_job` here)

sweep.decide.certify writes the plan (race_plan.json: per parameter group, its entrants,
the job folder of each, and the budget) into a job folder of its own, and any
executor runs it like a configuration's job: ONE process holding ONE GPU, so a
race never mixes nodes and works the same through the local, debug and Slurm
executors. Each round runs every job still needed once (an entrant still in
some group's race: one beaten beyond the noise leaves it), in an order rotated by
one each round (as stats.Race.order rotates a group's entrants), with the
outputs in the race's folder (the candidates' own files stay as the sweep left
them). One process of a job gives a sample to every group it is an entrant of:
the group's kernels' per-iteration time (all their shapes summed, median over
the process's iterations). How a round runs its jobs:

    lockstep (plan.lockstep; LockstepRace)  a fresh process of each job under the
             CUPTI library in turn mode, taking plan.turns timed iterations in
             turns with the others' (sweep.node.lockstep: the processes of several rounds
             start at once); whatever the sweep's backend, the race then measures
             with CUPTI's kernel records
    runs     (GpuRace, and the fallback when a program cannot take turns: race.json
             says why) one profiled run of each job under the sweep's backend; a run
             the GPU throttled is repeated after a pause (sweep.node.sampling)

With workloads, a job's "run" in a round is one run of every workload (each
through the job's own capture and parse, sweep.node.measure), and the group's
sample is the weighted objective the sweep picked by: the sum over workloads
of weight x the group's per-iteration time there (RacePlan.weights). The race
therefore certifies the overall pick, as selection made it; the per-workload
picks keep the sweep's own evidence. Each group's
stats.Race decides at its looks; a certified group leaves, and the rounds run
only the jobs the others still need, until every group has its result or the
shared budget (seconds, or rounds) is spent. The outcome is race.json.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sweep.core import atomic
from sweep.node import clocks, job as job_mod
from sweep.core.errors import SweepError
from sweep.node.job import Job
from sweep.node.process import JobFailed, gpu_lock
from sweep.node.lockstep import Lockstep, LockstepUnavailable, Program
from sweep.node import gpus, overlap
from sweep.node.race_runs import (ConcurrentRuns, GpuRace, Ran, Rounds, each_run, entrants, overlapping,  # noqa: F401
                                  rerun, rotated)
from sweep.profile import Measurement, cupti
from sweep.space.workloads import DEFAULT
from sweep.records import JobConfig, JobResult, Status, now, read_json, write_result
from sweep.stats import Entrant, Race, RaceResult

PLAN = "race_plan.json"
OUTCOME = "race.json"
PLAN_SCHEMA = "sweep-race-plan/1"
OUTCOME_SCHEMA = "sweep-race/1"
ROLE = "race"
RACE_WARMUP = 1      # warm-up iterations of a lockstep process at most (LockstepRace)


@dataclass(frozen=True, slots=True)
class Lane:
    """One group's race: its macros, kernel patterns, entrants (id: job tag) and each entrant's values."""

    macros: tuple[str, ...]
    patterns: tuple[str, ...]
    entrants: tuple[Entrant, ...]
    values: dict[str, dict[str, int]]

    def to_dict(self) -> dict[str, Any]:
        return {"macros": list(self.macros), "patterns": list(self.patterns),
                "entrants": [e.to_dict() for e in self.entrants], "values": self.values}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Lane":
        return cls(tuple(d["macros"]), tuple(d["patterns"]), tuple(Entrant(**e) for e in d["entrants"]),
                   {k: dict(v) for k, v in d["values"].items()})


@dataclass(frozen=True, slots=True)
class RacePlan:
    """What the race job runs. jobs: tag -> job folder; hashes: tag -> the config hash the
    entrant was measured with; budget_s: seconds for all groups together; max_rounds.
    weights: workload name -> weight in a sample ({}: a space without workloads, weight 1).
    lockstep: take the rounds in lockstep (sweep.node.lockstep), falling back to whole runs; turns:
    a lockstep process's turns (its sample their median); processes: most started at once.
    overlap: whole runs may share the GPU, each program holding it only for its GPU work
    (sweep.node.race_runs.ConcurrentRuns, at most `processes` at once; where the job's GPU allows it)."""

    lanes: tuple[Lane, ...]
    jobs: dict[str, str]
    hashes: dict[str, str]
    budget_s: float
    max_rounds: int
    alpha: float = 0.05
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    lockstep: bool = False
    turns: int = 3
    processes: int = 16
    overlap: bool = False

    def to_dict(self) -> dict[str, Any]:
        # weights only with workloads, lockstep and overlap only when on: a plan without them keeps its digest
        lockstep = {"lockstep": True, "turns": self.turns, "processes": self.processes} if self.lockstep else {}
        return {"schema": PLAN_SCHEMA, "lanes": [lane.to_dict() for lane in self.lanes], "jobs": self.jobs,
                "hashes": self.hashes, "budget_s": self.budget_s, "max_rounds": self.max_rounds, "alpha": self.alpha,
                **({"weights": self.weights} if self.weights else {}), **lockstep,
                **({"overlap": True} if self.overlap else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: Path | str = PLAN) -> "RacePlan":
        if not isinstance(d, dict) or d.get("schema") != PLAN_SCHEMA:
            raise SweepError(f"{path} is not a {PLAN_SCHEMA} race plan; run the sweep again to plan the race anew")
        try:
            return cls(tuple(Lane.from_dict(x) for x in d["lanes"]), dict(d["jobs"]), dict(d["hashes"]),
                       float(d["budget_s"]), int(d["max_rounds"]), float(d.get("alpha", 0.05)),
                       {str(k): float(v) for k, v in (d.get("weights") or {}).items()}, bool(d.get("lockstep", False)),
                       int(d.get("turns", 3)), int(d.get("processes", 16)), bool(d.get("overlap", False)))
        except (KeyError, TypeError, ValueError) as e:
            raise SweepError(f"{path}: not a valid race plan ({type(e).__name__}: {e}); run the sweep again") from None

    def digest(self) -> str:
        """Identity of the race: lanes, entrants with their config hashes, and the budget."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def tags(self) -> list[str]:
        """Every job the race runs, in the order the lanes name them."""
        return list(dict.fromkeys(e.id for lane in self.lanes for e in lane.entrants))


def group_ns(ms: Sequence[Measurement], patterns: Sequence[str], weights: Mapping[str, float] | None = None) -> float:
    """A group's per-iteration time in one run: its kernels' shapes summed (median over iterations, ns);
    with workloads, each workload's weighted by `weights` (the objective selection picked by)."""
    w = weights or {}
    return float(sum(m.total_median_ns * w.get(m.workload, 1.0) for m in ms
                     if any(fnmatch.fnmatchcase(m.kernel, p) for p in patterns)))


@dataclass(frozen=True, slots=True)
class Raced:
    """The outcome: per group (its macros) the RaceResult, rounds run, seconds spent."""

    results: dict[tuple[str, ...], RaceResult]
    rounds: int
    elapsed_s: float




def race(plan: RacePlan, rounds: Rounds, clock: Callable[[], float] = time.monotonic) -> Raced:
    """Run the rounds: `rounds(tags, r, left)` takes round r (0-based) of the jobs `tags` (those
    some group still races; `left` rounds, this one included, come before the next look that can
    decide) and returns how to read each one's Measurements (each_run: a run of each job;
    lockstep: a process of each taking its turns, read when asked). A group decides only at its
    decisive looks (stats.Race.decisive_looks), so the rounds up to the next one are taken and
    then read together, or up to the budget or max_rounds."""
    races = {lane.macros: Race(lane.entrants, alpha=plan.alpha, max_rounds=plan.max_rounds, budget_s=plan.budget_s,
                               min_rounds=min(5, plan.max_rounds)) for lane in plan.lanes}
    results: dict[tuple[str, ...], RaceResult] = {}
    start, r = clock(), 0
    while len(results) < len(races):
        live = [lane for lane in plan.lanes if lane.macros not in results]
        tags = list(dict.fromkeys(i for lane in live for i in races[lane.macros].alive))
        looks = sorted({n for lane in live for n in races[lane.macros].decisive_looks} | {plan.max_rounds})
        until = next(n for n in looks if n > r)     # the rounds up to the next look that can decide
        taken = []          # (read, elapsed) of those rounds
        while True:
            taken.append((rounds(tags, r, until - r), clock() - start))
            r += 1
            if r >= until or taken[-1][1] >= plan.budget_s:
                break
        for read, elapsed in taken:
            ran = read()
            for lane in live:
                if lane.macros in results:
                    continue
                times = {}
                for i in races[lane.macros].alive:
                    times[i] = group_ns(ran[i], lane.patterns, plan.weights)
                    if times[i] <= 0:
                        raise SweepError(f"{i}'s run launched none of {', '.join(lane.patterns)}: it cannot race "
                                         f"for {', '.join(lane.macros)}")
                res = races[lane.macros].add_round(times, elapsed)
                if res is not None:
                    results[lane.macros] = res
    return Raced(results, r, clock() - start)


# ---------------------------------------------------------------------------
# On the GPU: the race job
# ---------------------------------------------------------------------------


class LockstepRace:
    """The plan's jobs in lockstep (sweep.node.lockstep): round r starts a process of every workload's
    program of every job still racing (jobs in the order rotated by r), each takes plan.turns
    turns, and a job's sample is its processes' Measurements over their turns. Each process is
    asked for one iteration more than its turns, so it waits, not ends, after its last turn,
    and for at most RACE_WARMUP warm-up iterations: its turns come between other processes'
    (which leave the caches to them), so more warm-up would only lengthen every start-up,
    which the GPU takes one process at a time. Its files go under the race's folder as
    GpuRace's do."""

    def __init__(self, job: Job, plan: RacePlan, library: Path, reader: clocks.Reader | None,
                 facts: Mapping[str, Any]):
        programs: dict[str, Program] = {}
        self.keys: dict[str, list[str]] = {}
        for tag, ms in entrants(job, plan).items():
            for m in ms:
                key = tag if m.spec.name == DEFAULT else f"{tag}/{m.spec.name}"
                self.keys.setdefault(tag, []).append(key)
                command = m.program(iterations=plan.turns + 1, warmup=min(m.spec.warmup, RACE_WARMUP))
                programs[key] = Program(key, tuple(command), library, m.out)
        self.lockstep = Lockstep(programs, timeout_s=job.timeout_s, turns=plan.turns, max_processes=plan.processes,
                                 reader=reader, facts=facts)

    def __enter__(self) -> "LockstepRace":
        self.lockstep.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lockstep.__exit__(*exc)

    def round(self, tags: Sequence[str], r: int, left: int) -> Callable[[], Ran]:
        turns = self.lockstep.round([key for tag in rotated(tags, r) for key in self.keys[tag]], left)

        def read() -> Ran:
            return {tag: [dataclasses.replace(m, workload=key.partition("/")[2])
                          for key in self.keys[tag] for m in self.lockstep.sample(turns[key])] for tag in tags}
        return read

    def summary(self) -> dict[str, Any]:
        ls = self.lockstep
        return {"mode": "lockstep", "runs": ls.starts, "batches": ls.batches, "turns": ls.turns,
                "start_s": [round(x, 3) for x in ls.start_s], "throttled_runs": ls.throttled_rounds,
                "throttled_rounds": ls.throttled_rounds, "kept_throttled_rounds": ls.kept_throttled}


def lockstep_library(job: Job) -> tuple[Path | None, str]:
    """The CUPTI library a lockstep race runs its programs under, built (nvcc, once per toolkit) before
    the race takes the GPU: (its path, ""), or (None, why) when it cannot be built."""
    try:
        return cupti.library(cupti_cache(job)), ""
    except SweepError as e:
        return None, f"the CUPTI injection library could not be built: {e}"


def in_lockstep(job: Job, plan: RacePlan, library: Path, reader: clocks.Reader | None,
                facts: Mapping[str, Any]) -> tuple[Raced | None, dict[str, Any], str]:
    """The race in lockstep: (its outcome, the runner's summary, ""), or (None, {}, why) when its
    programs cannot take turns (the caller races them a run a sample instead)."""
    try:
        with LockstepRace(job, plan, library, reader, facts) as lr:
            return race(plan, lr.round), lr.summary(), ""
    except LockstepUnavailable as e:
        return None, {}, str(e)


def in_runs(job: Job, plan: RacePlan, reader: clocks.Reader | None, facts: Mapping[str, Any], held: float,
            fallback: str, token: Path | None = None) -> tuple[Raced, dict[str, Any]]:
    """The race a run a sample, on what is left of the budget since `held`: one run after another
    holding the GPU, or with `token` (overlap mode) the runs of the rounds up to each look at once,
    at most plan.processes, MAX_OVERLAP_SLOTS and this node's CPUs of them (each needs a core for
    its host work), each program holding the GPU's lock only for its GPU work
    (sweep.node.race_runs.ConcurrentRuns)."""
    g = GpuRace(job, plan, reader, facts, token)
    left = max(plan.budget_s - (time.monotonic() - held), 0.1 * plan.budget_s)
    workers = max(1, min(plan.processes, gpus.MAX_OVERLAP_SLOTS, len(os.sched_getaffinity(0))))
    rounds = ConcurrentRuns(g.run, workers, partial(g.run, alone=True)) if token else each_run(g.run)
    # other jobs' NVML checks see these programs as cooperating
    with overlap.holding(token), (rounds if token else nullcontext()):
        raced = race(dataclasses.replace(plan, budget_s=left), rounds)
    return raced, {**g.summary(), **({"gpu_mode": "overlap"} if token else {}),
                   **({"fallback": fallback} if fallback else {})}


def cupti_cache(job: Job) -> Path:
    """Where the race finds (or builds) the CUPTI library: the jobs' cache folder for the cupti backend."""
    cache = job.cfg.settings.cache_dir
    return Path(cache) if cache else job.dir.parent.parent.joinpath(*cupti.CACHE)


def outcome(plan: RacePlan, raced: Raced, facts: Mapping[str, Any], gpu_s: float,
            summary: Mapping[str, Any]) -> dict[str, Any]:
    """race.json's content. summary: how the rounds were taken (mode "lockstep" or "runs"; runs:
    programs started; throttled_runs; with lockstep, turns and throttled_rounds; fallback: why a
    lockstep race ran a run a sample)."""
    return {"schema": OUTCOME_SCHEMA, "plan_digest": plan.digest(), "finished_at": now(), "node": dict(facts),
            "rounds": raced.rounds, "elapsed_s": raced.elapsed_s, "gpu_s": gpu_s, **summary,
            "lanes": [{"macros": list(lane.macros), "values": lane.values,
                       "result": raced.results[lane.macros].to_dict()} for lane in plan.lanes]}


def read_outcome(race_dir: Path) -> dict[str, Any] | None:
    """race.json of a race folder, or None when there is none (or it is not one)."""
    try:
        d = read_json(Path(race_dir) / OUTCOME)
    except (OSError, SweepError):
        return None
    return d if isinstance(d, dict) and d.get("schema") == OUTCOME_SCHEMA else None


def run_job(job: Job, stages: str, previous: JobResult | None) -> JobResult:
    """The race as a job (Job.run's hook for role "race"): nothing to build; measure runs the race."""
    cfg: JobConfig = job.cfg
    if stages == "build":    # the entrants are built; a build stage only says so, and a dry run never races
        atomic.write_json(job.dir / "built.json", {"config_hash": cfg.config_hash, "at": now(), "build": {},
                                                   "seconds": 0.0, "interval": None})
        return JobResult.ended(cfg, Status.OK, "build", "nothing to build: the entrants are built", previous=previous)
    t0, start = time.monotonic(), time.time()
    status, stage, reason, log = Status.OK, "", "", ""
    env: dict[str, Any] = {}
    try:
        plan = RacePlan.from_dict(read_json(job.dir / PLAN), job.dir / PLAN)
        library, fallback = lockstep_library(job) if plan.lockstep else (None, "")
        with gpu_lock(job.gpu_lock_path):
            job.state("race")
            held = time.monotonic()
            reader = clocks.reader()
            facts = clocks.fingerprint(reader)
            env = dict(facts)
            raced, summary = None, {}
            if library is not None:
                raced, summary, fallback = in_lockstep(job, plan, library, reader, facts)
            shared = plan.overlap and overlapping(job)
            if raced is None and not shared:   # a run a sample, on what is left of the budget
                raced, summary = in_runs(job, plan, reader, facts, held, fallback)
        if raced is None:   # overlap mode: the lock let go; each program takes it around its GPU work
            raced, summary = in_runs(job, plan, reader, facts, held, fallback, Path(job.gpu_lock_path))
        gpu_s = time.monotonic() - held
        atomic.write_json(job.dir / OUTCOME, outcome(plan, raced, facts, gpu_s, summary))
    except JobFailed as f:
        status, stage, reason, log = f.status, f.stage, f.reason, str(f.log or "")
    except SweepError as e:
        status, stage, reason = Status.RUNTIME_FAILED, "race", str(e)
    finally:
        (job.dir / "state.json").unlink(missing_ok=True)
    result = JobResult.ended(cfg, status, stage, reason, log, previous=previous, env=env,
                             timings={"race": time.monotonic() - t0, "total": time.monotonic() - t0},
                             intervals={"race": [start, time.time()]})
    write_result(job.dir, result)
    return result


job_mod.ROLES[ROLE] = run_job
