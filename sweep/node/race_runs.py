"""The certification race's rounds of whole runs (sweep.node.race's "runs" mode, and its fallback
when programs cannot take turns): a run of each entrant's profiled program a round.

    rotated          a round's order: rotated by one each round, as stats.Race.order
    each_run         rounds that run each job once, one after another (the GPU held for the race)
    ConcurrentRuns   overlap mode: the runs of every round up to the race's next look at once, at
                     most `workers` of them, each program holding the GPU's lock only around its GPU
                     work (sweep/profile/cupti_token.h), so rounds of host-heavy programs cost their
                     GPU work, not their runs; a run out of GPU memory beside the others runs again
                     alone once they have ended (sweep.node.together): its sample is that run's, the
                     entrant loses nothing, the race's record counts it
    GpuRace          the entrants' Measurings, run through their own jobs' capture and parse
    overlapping      whether the race may run its rounds concurrently (sweep.node.overlap's rule)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from sweep.node import clocks, gpus, measure, overlap
from sweep.node.job import Job
from sweep.node.process import JobFailed, Tools
from sweep.node.together import settled
from sweep.profile import Measurement
from sweep.records import Status, read_result

Ran = Mapping[str, Sequence[Measurement]]
Rounds = Callable[[Sequence[str], int, int], Callable[[], Ran]]


def rotated(ids: Sequence[str], round_index: int) -> list[str]:
    """ids in the order to run them in round `round_index` (0-based): rotated by one each round, as Race.order."""
    k = len(ids)
    return [ids[(round_index + i) % k] for i in range(k)] if k else []


def each_run(run: Callable[[str], Sequence[Measurement]]) -> Rounds:
    """Rounds of whole runs: round r runs each job's profiled program once (`run(tag)`), in the
    order rotated by r; a job's sample is its run."""
    def rounds(tags: Sequence[str], r: int, left: int) -> Callable[[], Ran]:
        ran = {tag: run(tag) for tag in rotated(tags, r)}
        return lambda: ran
    return rounds


class ConcurrentRuns:
    """Rounds of whole runs taken at once (overlap mode): taking round r submits each job's run,
    in the order rotated by r, to one pool of `workers` that every round shares, and returns at
    once; the race takes the rounds up to its next look before it reads any (sweep.node.race.race),
    so those rounds run together, not one after another. Each program's GPU work is its own
    under the token, so the samples are those of runs alone on the GPU; the pool starts runs in
    the order taken, so a round's runs run side by side, the pairing the race's statistics rest on.

    Reading a round waits for every run taken so far (a run is a process: it ends by itself,
    never abandoned); then a run of the round that ran out of GPU memory beside the others is
    taken again by `alone(tag)`, holding the GPU by itself, as nothing else runs by then; any
    other failure, the first in the round's order, is raised. Close it (or use it as a context
    manager) to let the pool's threads go."""

    def __init__(self, run: Callable[[str], Sequence[Measurement]], workers: int,
                 alone: Callable[[str], Sequence[Measurement]] | None = None):
        self._run, self._alone = run, alone
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="race-run")
        self._taken: list[Future[Sequence[Measurement]]] = []

    def __call__(self, tags: Sequence[str], r: int, left: int) -> Callable[[], Ran]:
        order = rotated(tags, r)
        futures = [self._pool.submit(self._run, tag) for tag in order]
        self._taken.extend(futures)

        def read() -> Ran:
            wait(self._taken)
            again = (lambda i: self._alone(order[i])) if self._alone is not None else None
            got, _ = settled(futures, again)
            return dict(zip(order, got))
        return read

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> "ConcurrentRuns":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def overlapping(job: Job) -> bool:
    """The race's runs may share the GPU: the job's own rule (sweep.node.overlap.mode) on the race's
    profile settings, its lock and its GPU."""
    return overlap.mode(job.cfg.profile, job.gpu_lock_path, gpus.visible()) == overlap.OVERLAP


def rerun(job_dir: Path, out: Path, tools: Tools, timeout_s: float) -> list[measure.Measuring]:
    """A candidate's job whose profiled program(s) run again, one Measuring per workload, the outputs
    under `out` (the race's folder). None re-checks (check=False): every entrant passed its own job's
    check, and a race round re-checking it (the engine's every path against transformers) would spend
    the GPU on what is not raced."""
    entrant = Job(job_dir, tools=tools, timeout_s=timeout_s)
    return [measure.Measuring(entrant, m.spec, measure.folder(out, m.spec), check=False) for m in entrant.measuring]


def entrants(job: Job, plan: Any) -> dict[str, list[measure.Measuring]]:
    """Each job the plan races (tag -> its Measurings, one per workload), each checked to hold an
    ok result of the very configuration the race was planned on."""
    out = {}
    for tag in plan.tags():
        d = Path(plan.jobs[tag])
        done = read_result(d)
        if done is None or done.status != Status.OK or done.config_hash != plan.hashes.get(tag):
            raise JobFailed(Status.RUNTIME_FAILED, "race", f"entrant {tag} ({d}) has no ok result of the "
                            "configuration planned: run the sweep again to plan the race anew")
        out[tag] = rerun(d, job.dir / tag, job.tools, job.timeout_s)
    return out


class GpuRace:
    """The plan's jobs, each run once per call of `run(tag)` (every workload once; throttled runs
    repeated), on this GPU: each through its own job's capture and parse (sweep.node.measure), its
    outputs under the race's folder (<race>/<tag>/, a workload's in workloads/<name>/ there)."""

    def __init__(self, job: Job, plan: Any, reader: clocks.Reader | None, facts: Mapping[str, Any],
                 token: Path | None = None):
        self.reader, self.facts = reader, facts
        self.throttled_runs, self.runs = 0, 0
        self.alone: list[str] = []              # entrants run again alone, out of GPU memory beside others
        self.entrants = entrants(job, plan)
        self._count = threading.Lock()          # runs may come from several threads (overlap mode)
        self.apart = token is not None          # overlap mode: an entrant's runs at once, each in files of its own
        for tag, ms in self.entrants.items():
            be = ms[0].job.backend
            if be.tool and not job.tools.path(be.tool):
                raise JobFailed(Status.RUNTIME_FAILED, "race", f"{be.tool} not found for the race")
            ms[0].job.gpu_token = token         # overlap mode: each program takes the GPU's lock for its GPU work
            for m in ms:
                m.invocation()

    def run(self, tag: str, alone: bool = False) -> list[Measurement]:
        """`tag`'s run (every workload once); `alone`: each holding the GPU by itself (Measuring.alone),
        again after it ran out of GPU memory beside the round's other programs."""
        ms: list[Measurement] = []
        for m in self.entrants[tag]:
            with m.alone() if alone else nullcontext():
                got, sampled = m.once(self.reader, self.facts, apart=self.apart and not alone)
            ms.extend(got)
            with self._count:
                self.throttled_runs += sampled.throttled_runs
                self.runs += 1 + sampled.throttled_runs
        if alone:
            with self._count:
                self.alone.append(tag)
        return ms

    def summary(self) -> dict[str, Any]:
        out = {"mode": "runs", "runs": self.runs, "throttled_runs": self.throttled_runs}
        if self.alone:
            out["alone_runs"] = len(self.alone)
            out["alone_note"] = (f"{len(self.alone)} run(s) ran out of GPU memory beside the round's other programs "
                                 f"and ran again alone: {', '.join(sorted(set(self.alone)))}")
        return out
