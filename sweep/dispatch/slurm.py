"""Slurm, through submitit: job arrays that fit the cluster's limits, watched sparingly, resumable.

Submission (sweep.dispatch.slurm_submit): jobs go out as job arrays, one sbatch
each, `--array=0-N%P`. The cluster's limits (sweep.dispatch.slurm_limits: MaxArraySize,
the user's submit limit) decide how much goes out at once: a plan larger than
MaxArraySize is split into several arrays, and the next is submitted as tasks leave
the queue, never putting more of the user's tasks in the queue than the submit
limit allows. At most slurm.array_parallelism tasks of the sweep run at once across
its arrays: a new array gets what the earlier ones leave of it, and its throttle is
raised (scontrol update ArrayTaskThrottle) as they drain.

Build partition: with slurm.build_partition, each batch goes out as a CPU-only build
array there and a measure array that depends on it task by task
(`--dependency=aftercorr`), so only measuring holds a GPU and a failed build stops
its own measure task alone: the driver cancels that task and records the
configuration with the build's failure ("build failed: ...").

Watching (sweep.dispatch.slurm_queue): one `squeue` per poll interval for the
user's whole queue, never one call per job; a task has ended when it has left the
queue. Its result.json is then the truth. A task that left no result is classified
from the scheduler (`scontrol show job`, which remembers a job for MinJobAge; sacct
when an accounting database answers) and submitit's own outcome file: timeout,
cancelled, node failure (runtime_failed), preempted.

Asynchronous search (`stream`): whenever a configuration ends, the driver asks the
strategy for as many new ones as array_parallelism leaves room for and submits them
at once (single tasks, or small arrays), so no trial waits for another.

Faults inside the job (see SweepTask): Slurm sends USR2 shortly before the time
limit and on preemption (submitit's --signal). At the time limit the task
records a timeout result itself (with the stage it was in) and is not requeued:
it would only time out again. On preemption it records the interrupted attempt
and asks submitit to requeue it; the next attempt starts over (builds come from
the object cache).

Resume: a driver started again reads slurm.json, asks squeue which recorded
tasks are still queued or running, and watches those instead of submitting them
again (a build still queued gets its measure task once it has built); the rest
go out as new arrays.
"""

from __future__ import annotations

import getpass
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from sweep.core.errors import SweepError
from sweep.dispatch import Ask, Context, Executor, OnResult, PendingJob
from sweep.dispatch.slurm_limits import Limits, next_array, read_limits, throttles
from sweep.dispatch.slurm_queue import (LIVE_STATES, NEVER, STATS, THROTTLED, Queued, build_record,  # noqa: F401
                                         built, cancel, finished, queue, set_throttle)
from sweep.dispatch.slurm_submit import (SubmitLimit, SweepTask, executor_parameters, load_records,  # noqa: F401
                                          log_folder, submit, task_ids)
from sweep.dispatch.progress import Progress
from sweep.records import JobResult, Status, write_result

SLURM_POLL_MIN_S = 1.0      # squeue right after a change
SLURM_POLL_MAX_S = 5.0      # squeue at most this often while nothing changes


@dataclass(slots=True)
class Task:
    """An array task the driver watches."""

    job: PendingJob
    stages: str                  # what it runs: all | build | measure
    log_dir: str
    array_id: str
    measure: str | None = None   # a build task of a split configuration: its measure task ("": none queued yet)


@dataclass(slots=True)
class Array:
    """An array the driver watches: its throttle rises as the sweep's earlier arrays drain."""

    array_id: str
    build: bool
    throttle: int
    job_ids: list[str]


class SlurmExecutor(Executor):
    name = "slurm"
    doc = "job arrays within the cluster's limits, watched with one squeue per interval"
    finds_running = True   # slurm.json and squeue say which tasks of an earlier driver still run

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.s = ctx.space.slurm
        self.watching: dict[str, Task] = {}                 # job id "A_i" -> task
        self.backlog: list[tuple[PendingJob, str]] = []     # (job, all | split | build | measure), not yet submitted
        self.open: set[str] = set()                         # job folders handed over and not yet reported
        self.arrays: list[Array] = []
        self.limits: Limits | None = None
        self.queued = 0                                     # the user's tasks in the queue (last squeue + submitted since)
        self.queue: dict[str, Queued] = {}
        self.say: Callable[[str], None] = lambda text: None

    @classmethod
    def preflight(cls, space, dry_run: bool) -> None:
        executor_parameters(space.slurm, space.name)  # refuses what an #SBATCH line cannot carry, before rendering
        if not shutil.which("sbatch"):
            raise SweepError("sbatch not found: --executor slurm runs on a Slurm login node; use --executor local on a GPU machine")

    def parallelism(self) -> int:
        return self.s.array_parallelism

    # -- handing jobs over --------------------------------------------------------
    def submit(self, jobs: list[PendingJob], stages: str, progress: Progress | None = None) -> None:
        """Take jobs over: those a previous driver submitted and that are still queued are watched,
        the rest wait in the backlog and go out as the limits allow."""
        if progress is not None:
            self.say = progress.note
        if self.limits is None:
            self.limits = read_limits(self.s, getpass.getuser())
            self.say(f"  Slurm limits: {self.limits.describe()}")
        self._read_queue()
        attached = self._attach(jobs, stages)
        if attached:
            self.say(f"  {attached} job(s) still queued from an earlier run: watching them, not resubmitting")
        self._top_up()

    def _kind(self, job: PendingJob, stages: str) -> str:
        if stages != "all" or not self.s.build_partition:
            return stages
        return "measure" if built(job) else "split"

    def _attach(self, jobs: list[PendingJob], stages: str) -> int:
        by_dir = {str(j.dir): j for j in jobs}
        runs: dict[str, tuple[str, dict]] = {}     # dir -> (job id, record) of a live task that measures (or dry-builds)
        builds: dict[str, tuple[str, dict]] = {}   # dir -> (job id, record) of a live build task of a split config
        for r in load_records(self.ctx.sweep_dir):
            split_build = r.get("build") and r["stages"] == "build" and stages == "all"
            if (r["stages"] == "build") != (stages == "build") and not split_build:
                continue
            for jid, d, h in zip(task_ids(r), r["dirs"], r["hashes"]):
                q = self.queue.get(jid)
                if d in by_dir and by_dir[d].config_hash == h and q is not None and q.state in LIVE_STATES:
                    (builds if split_build else runs).setdefault(d, (jid, r))
        for d, j in by_dir.items():
            self.open.add(d)
            if d in runs:
                jid, r = runs[d]
                self.watching[jid] = Task(j, r["stages"], r["log_dir"], r["array_id"])
                self._remember(r)
            if d in builds:
                jid, r = builds[d]
                self.watching[jid] = Task(j, "build", r["log_dir"], r["array_id"], measure=runs.get(d, ("",))[0])
                self._remember(r)
            if d not in runs and d not in builds:
                self.backlog.append((j, self._kind(j, stages)))
        return len(set(runs) | set(builds))

    def _remember(self, record: dict) -> None:
        if not any(a.array_id == record["array_id"] for a in self.arrays):
            self.arrays.append(Array(record["array_id"], bool(record.get("build")),
                                     int(record.get("throttle") or self.s.array_parallelism), task_ids(record)))

    def _top_up(self) -> None:
        """Submit from the backlog what the limits allow now, as arrays of one kind each."""
        assert self.limits is not None
        while self.backlog:
            first, kind = self.backlog[0]
            group = [j for j, k in self.backlog if k == kind and j.partition == first.partition]
            per = 2 if kind == "split" else 1
            n, throttle = next_array(len(group), self.queued, len(self.open) - len(self.backlog), self.limits,
                                     self.parallelism(), per)
            if n == 0:
                return
            jobs = group[:n]
            try:
                self._submit(jobs, kind, throttle)
            except SubmitLimit as e:
                self.limits = self.limits.learned(self.queued, str(e))
                self.say(f"  sbatch refused more tasks ({e}): waiting for some to leave the queue")
                return
            taken = {str(j.dir) for j in jobs}
            self.backlog = [(j, k) for j, k in self.backlog if str(j.dir) not in taken]
            self.queued += n * per

    def _submit(self, jobs: list[PendingJob], kind: str, throttle: int) -> None:
        ctx, s = self.ctx, self.s
        if kind == "split":
            b = submit(jobs, "build", ctx.sweep_dir, s, ctx.space.name, throttle=throttle, build=True)
            self._remember(b)
            try:
                m = submit(jobs, "measure", ctx.sweep_dir, s, ctx.space.name, throttle=throttle, after=b["array_id"],
                       partition=jobs[0].partition)
            except BaseException:
                for jid, j in zip(b["job_ids"], jobs):   # the builds are queued: once built, their measures follow
                    self.watching[jid] = Task(j, "build", b["log_dir"], b["array_id"], measure="")
                raise
            self._remember(m)
            for bid, mid, j in zip(b["job_ids"], m["job_ids"], jobs):
                self.watching[bid] = Task(j, "build", b["log_dir"], b["array_id"], measure=mid)
                self.watching[mid] = Task(j, "measure", m["log_dir"], m["array_id"])
            self.say(f"  submitted build array {b['array_id']} on {s.build_partition} and measure array "
                     f"{m['array_id']} after it ({len(jobs)} tasks each, at most {throttle} at once)")
            return
        rec = submit(jobs, kind, ctx.sweep_dir, s, ctx.space.name, throttle=throttle,
                     build=kind == "build" and bool(s.build_partition), partition=jobs[0].partition)
        self._remember(rec)
        for jid, j in zip(rec["job_ids"], jobs):
            self.watching[jid] = Task(j, kind, rec["log_dir"], rec["array_id"])
        where = f" on {rec['partition']}" if s.partitions else ""
        self.say(f"  submitted job array {rec['array_id']}{where} ({len(jobs)} tasks, at most {throttle} at once)")

    # -- watching -------------------------------------------------------------------
    def run(self, jobs: list[PendingJob], stages: str, on_result: OnResult, progress: Progress) -> None:
        if jobs:
            with self.interruptible():
                self.submit(jobs, stages, progress)
                self.watch(on_result, progress)

    def stream(self, ask: Ask, stages: str, on_result: OnResult, progress: Progress) -> None:
        """Keep array_parallelism configurations in flight, asking for more as each ends."""
        first = ask(self.parallelism())
        if first:
            with self.interruptible():
                self.submit(first, stages, progress)
                self.watch(on_result, progress, ask=ask, stages=stages)

    def watch(self, on_result: OnResult, progress: Progress, ask: Ask | None = None, stages: str = "all") -> None:
        """Watch every task until it has left the queue (with `ask`: and until it has no more to give)."""
        # squeue is slurmctld's work: at most every SLURM_POLL_MAX_S while nothing changes, but every
        # SLURM_POLL_MIN_S right after something ended or was submitted (short tasks end in bursts,
        # and a fixed 5 s made every phase of a quick sweep wait half a poll on average).
        poll_s = max(self.ctx.poll_s, SLURM_POLL_MIN_S)
        want_more = ask is not None
        while self.open or want_more:
            ended = self._poll(on_result)
            poll_s = max(self.ctx.poll_s, SLURM_POLL_MIN_S) if ended else min(poll_s * 1.5, SLURM_POLL_MAX_S)
            free = self.parallelism() - len(self.open)
            if ask is not None and free > 0 and (want_more or ended):
                more = ask(free)
                want_more = bool(more)
                if more:
                    self._attach(more, stages)
            self._top_up()
            running = sum(1 for jid, t in self.watching.items()
                          if self.queue.get(jid, Queued("")).state not in ("", "PENDING"))
            progress.show(running=running)
            if self.open:
                time.sleep(poll_s)

    def _read_queue(self) -> None:
        self.queue = queue()
        self.queued = len(self.queue)

    def _poll(self, on_result: OnResult) -> int:
        """One squeue: report what has ended, cancel measure tasks whose build failed, raise throttles.
        Returns how many configurations ended."""
        before = len(self.open)
        self._read_queue()
        doomed = []
        for jid, t in list(self.watching.items()):
            q = self.queue.get(jid)
            if q is None:
                del self.watching[jid]
                self._ended(jid, t, on_result)
            elif t.stages == "measure" and q.reason == NEVER:   # its build failed while no driver watched it
                doomed.append(jid)
        for jid in doomed:
            if jid in self.watching:   # not already ended with its build task in this poll
                self._build_failed(self.watching[jid].job, build_record(self.watching[jid].job), [jid], on_result)
        self._raise_throttles()
        return before - len(self.open)

    def _ended(self, jid: str, t: Task, on_result: OnResult) -> None:
        r = finished(t.job, jid, Path(t.log_dir), t.stages)
        if t.measure is None:
            self._report(t.job, r, on_result)
        elif r.status != Status.OK:
            self._build_failed(t.job, r, [t.measure] if t.measure else [], on_result)
        elif t.measure == "":
            self.backlog.append((t.job, "measure"))   # built; its measure task was never queued (resume)

    def _build_failed(self, job: PendingJob, r: JobResult, measures: list[str], on_result: OnResult) -> None:
        for jid in measures:
            self.watching.pop(jid, None)
        cancel([jid for jid in measures if jid in self.queue])
        r = replace(r, reason=f"build failed: {r.reason}; its measure task was cancelled")
        write_result(job.dir, r)
        self._report(job, r, on_result)

    def _report(self, job: PendingJob, r: JobResult, on_result: OnResult) -> None:
        self.open.discard(str(job.dir))
        on_result(r)

    def _raise_throttles(self) -> None:
        """Raise an array's throttle as the earlier ones drain, where it holds tasks back now
        (squeue's reason JobArrayTaskLimit): one scontrol call then, none while the cluster is full."""
        for build in (True, False):
            arrays = [a for a in self.arrays if a.build == build]
            counts = [(sum(1 for jid in a.job_ids if jid in self.watching), a.throttle) for a in arrays]
            for a, want in zip(arrays, throttles(counts, self.parallelism())):
                held = any(self.queue.get(jid, Queued("")).reason == THROTTLED for jid in a.job_ids)
                if want > a.throttle and held and set_throttle(a.array_id, want):
                    a.throttle = want

    def cancel(self) -> None:
        """The driver's interrupt leaves the arrays running: their tasks write their own
        results, and the next driver watches them (resume). Nothing is cancelled."""

    def interrupted(self) -> str:
        return ("interrupted: the Slurm jobs already submitted keep running and write their own results; the same "
                "command resumes and watches them (scancel stops them)")


EXECUTOR = SlurmExecutor
