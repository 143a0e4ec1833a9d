"""The local executor: this machine's CPUs build, its GPUs measure, every GPU kept busy.

Builds run in a thread pool, as many at once as keep the GPUs fed (build_parallel: from the
CPUs and the measured build and measure times; make -j shares the CPUs among them).
Measurements run in long-lived worker processes (sweep.dispatch.workers), each taking the
next built job and the first GPU that frees (a node-wide admission slot of any visible GPU,
then that GPU's node-wide lock, sweep.node.gpus), so no process start-up sits between two
measurements and no GPU waits while another has a queue. A GPU admits measuring_slots()
jobs measuring (one; several in overlap mode) plus one started and waiting at its lock; one spare worker a GPU holds the
next job ready. A strategy is asked again as each job ends (stream), never batch by batch.
Jobs write their own result.json: a killed driver loses nothing (a worker finishes its job).
Where the time between a build and a GPU went is logged in jobs/<sweep>/_dispatch/handover.jsonl
(HANDOVER_LOG): when the workers were started, and per measured job when its build was done here,
when it was handed to a worker, and when that worker took it up (after its imports, for its first
job), was admitted to a GPU and ended (epoch seconds; bench/scaling.py reads it).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sweep.core.errors import SweepError
from sweep.dispatch import (Ask, Context, Executor, OnResult, PendingJob, job_environment, record_lost,
                             visible_gpus)
from sweep.dispatch.occupancy import Occupancy
from sweep.dispatch.progress import Progress
from sweep.dispatch import workers
from sweep.dispatch.workers import STAGED, Worker
from sweep.node import gpus, group
from sweep.node.job import Job
from sweep.records import JobResult, Status

SPARE = 1               # workers a GPU beyond its admission slots: the next job, ready for whichever GPU frees
HANDOVER_LOG = "handover.jsonl"
SPAWN_BATCH = 8         # workers started a look of the dispatch loop (each start costs this loop a fork and exec)
EXCEPTION_LINE = re.compile(r"^\w+(Error|Exception|Interrupt|Exit)\b.*")


def no_gpu_message() -> str:
    return ("no GPU visible here (nvidia-smi finds none, or CUDA_VISIBLE_DEVICES is empty): run on a GPU node, use "
            "--executor slurm from a login node, or --dry-run to only render and compile")


def workers_per_gpu(slots: int) -> int:
    """Worker processes a GPU: its measuring slots, the job staged at its lock, and a spare."""
    return slots + STAGED + SPARE


def gpu_cost_s(result: JobResult) -> float | None:
    """Seconds of its GPU's capacity a measured job used up, for build_parallel: in overlap mode
    the time its programs held the GPU token (a run's, times its runs), since several jobs
    measure at once and only their GPU work takes turns; otherwise its held interval. Sizing
    builds from the whole interval in overlap mode starved the GPUs of built jobs: a 1,552-point
    brute force measured at 71-84% occupancy while 5 s builds ran too few at once."""
    env = result.env or {}
    held_s = (env.get("gpu_use") or {}).get("held_s")
    runs = result.sampling.runs if result.sampling is not None else 1
    if env.get("gpu_mode") == "overlap" and isinstance(held_s, (int, float)) and held_s > 0:
        return float(held_s) * max(1, runs)
    held = (result.intervals or {}).get("gpu")
    return float(held[1] - held[0]) if held else None


def build_parallel(cpus: int, n_gpus: int, build_s: list[float], measure_s: list[float]) -> int:
    """Builds at once: enough that built jobs come at least as fast as the GPUs measure them
    (GPUs x build time / measure time, a quarter spare), at least a quarter of the CPUs (or one
    a GPU), at most the CPUs. Until a measurement was timed, every CPU builds (make -j1 each):
    nothing else needs them yet, and the GPUs wait for the first built jobs. Why: at a quarter of
    16 CPUs (make -j4 each, which a one-file program cannot use) an H100 in overlap mode took 20 s
    to reach 14 jobs measuring at once (examples/host_heavy, 5 s builds), a third of its phase."""
    if not build_s or not measure_s:
        return max(1, cpus)
    floor = max(1, cpus // 4, n_gpus)
    b, m = sum(build_s) / len(build_s), max(sum(measure_s) / len(measure_s), 0.05)
    return max(1, min(cpus, max(floor, math.ceil(1.25 * n_gpus * b / m))))


class LocalExecutor(Executor):
    name = "local"
    doc = "this machine: builds on the CPUs, measurements on every visible GPU, each job on the first GPU free"

    def __init__(self, ctx: Context, gpus: list[str] | None = None, build_parallel: int = 0):
        super().__init__(ctx)
        self.gpus = visible_gpus() if gpus is None else gpus
        self.build_parallel = build_parallel
        self.queued: list[PendingJob] = []
        self.stages = "all"
        self.workers: list[Worker] = []
        self.in_flight = 0          # jobs building or measuring (the last look)
        self.stopped = 0
        self.occupancy = Occupancy(self.gpus)
        self.ran_on: dict[str, str] = {}     # job tag -> the GPU it measured on
        self._ask: Ask | None = None
        self._started = 0           # workers started (their logs are numbered)
        self._builds_now = 0        # builds at once, as last sized (build_parallel)
        self._ready_at: dict[str, float] = {}   # job tag -> when its build was done here (epoch seconds)
        self._log: Path | None = None           # the hand-over log (HANDOVER_LOG)
        self.builds_started = 0                 # builds handed to the pool, over the executor's dispatches
        # set by cancel(): the pool's builds stop their make and record nothing (sweep.node.build.build)
        self._stop_builds = threading.Event()

    @classmethod
    def preflight(cls, space, dry_run: bool) -> None:
        if not dry_run and not visible_gpus():
            raise SweepError(no_gpu_message())

    def lock_paths(self) -> dict[str, Path]:
        """Each GPU's lock: one per GPU for the whole node (sweep.node.gpus), so two sweeps, or two
        users' sweeps, never measure on one GPU at once."""
        uuids = {} if all(gpus.UUID_RE.match(g) for g in self.gpus) else gpus.uuids_by_index()
        directory = gpus.lock_dir()
        return {g: gpus.lock_path(g, uuids, directory) for g in self.gpus}

    def slots(self) -> int:
        """Jobs measuring on one GPU at once: one, or several in overlap mode (sweep.node.gpus.measuring_slots)."""
        return gpus.measuring_slots(self.ctx.space, len(os.sched_getaffinity(0)), max(1, len(self.gpus)))

    def parallelism(self) -> int:
        """Jobs kept in flight (a learning strategy is asked for this many, less those running): one
        a worker, and as many again or the builds running at once (build_parallel), whichever is
        more, so builds run ahead of the GPUs."""
        workers_now = max(1, len(self.gpus)) * workers_per_gpu(self.slots())
        return workers_now + max(workers_now, self._builds_now)

    def submit(self, jobs: list[PendingJob], stages: str) -> None:
        if stages != "build" and not self.gpus:
            raise SweepError(no_gpu_message())
        self.queued.extend(jobs)
        self.stages = stages

    def stream(self, ask: Ask, stages: str, on_result: OnResult, progress: Progress) -> None:
        """Asks for parallelism() jobs, and again for as many as ended each time some do."""
        if stages != "build" and not self.gpus:
            raise SweepError(no_gpu_message())
        self._ask, self.stages = ask, stages
        with self.interruptible():
            self.watch(on_result, progress)

    def cancel(self) -> None:
        """Ctrl-C: each busy worker gets SIGINT (its job leaves no result and kills its programs; the
        next run measures it) and ends; idle ones end as their input closes."""
        self.stopped = self.in_flight
        self._stop_builds.set()
        for w in self.workers:
            (w.interrupt if w.job is not None else w.close)()
        deadline = time.monotonic() + group.GRACE_S + 10
        while any(w.alive for w in self.workers) and time.monotonic() < deadline:
            time.sleep(0.1)

    def interrupted(self) -> str:
        return f"interrupted: stopped {self.stopped} running job(s); the same command resumes"

    def watch(self, on_result: OnResult, progress: Progress) -> None:
        ctx, stages = self.ctx, self.stages
        folder = ctx.sweep_dir / "_dispatch"
        folder.mkdir(parents=True, exist_ok=True)
        cpus = len(os.sched_getaffinity(0))
        build_s: list[float] = []     # seconds a build took, and a measurement held its GPU: build_parallel
        measure_s: list[float] = []
        offer = {}
        if stages != "build":
            locks = self.lock_paths()
            offer = {"gpus": self.gpus, "locks": [str(locks[g]) for g in self.gpus],
                     "slots": self.slots() + STAGED}
            self._log = folder / HANDOVER_LOG
        # Workers are started a few a look, after that look's builds were handed to the pool: their
        # start-up (the framework's imports) overlaps the first builds instead of delaying them (72
        # started at once, for four GPUs, took 4 s of this loop on a 2-core machine)
        most = len(self.gpus) * workers_per_gpu(self.slots()) if offer else 0
        wanted = most if self._ask else min(most, len(self.queued))
        began = time.time()
        ready: list[PendingJob] = []
        building: dict[Future, PendingJob] = {}
        pool = ThreadPoolExecutor(max_workers=max(1, cpus))
        asked_out, since_ask = self._ask is None, True

        stop_builds = self._stop_builds = threading.Event()   # this dispatch's: cancel() sets it

        def build_one(j: PendingJob, make_jobs: int) -> JobResult | None:
            t0 = time.monotonic()
            result = Job(j.dir, build_jobs=make_jobs, stop_build=stop_builds.wait).run("build")
            build_s.append(time.monotonic() - t0)
            return None if (result.status == Status.OK and stages != "build") else result

        try:
            while True:
                busy = [w for w in self.workers if w.job is not None]
                in_flight = len(self.queued) + len(building) + len(ready) + len(busy)
                if not asked_out and since_ask and in_flight < self.parallelism():
                    got = self._ask(self.parallelism() - in_flight) if self._ask else []
                    self.queued.extend(got)
                    asked_out = not got and not in_flight    # [] with jobs in flight: asked again as they end
                    since_ask = bool(got)
                if asked_out and not (self.queued or building or ready or busy):
                    break
                parallel = self._builds_now = self.build_parallel or build_parallel(cpus, len(self.gpus), build_s,
                                                                                    measure_s)
                while self.queued and len(building) < parallel:
                    j = self.queued.pop(0)
                    building[pool.submit(build_one, j, max(1, cpus // parallel))] = j
                    self.builds_started += 1
                if len(self.workers) < wanted:
                    for _ in range(min(SPAWN_BATCH, wanted - len(self.workers))):
                        self._spawn(offer, folder)
                    if len(self.workers) == wanted:
                        self._record({"event": "workers", "from": began, "to": time.time(), "workers": wanted})
                for fut in [f for f in building if f.done()]:
                    j = building.pop(fut)
                    result = fut.result()
                    if result is None:
                        ready.append(j)
                        self._ready_at[j.tag] = time.time()
                    else:  # a failed build, or a dry run's end
                        on_result(result)
                        since_ask = True
                while ready and ctx.ready_to_measure():
                    idle = next((w for w in self.workers if w.job is None), None)
                    if idle is None and len(self.workers) < most:
                        idle = self._spawn(offer, folder)      # one that died was replaced, or not yet started
                    if idle is None:
                        break
                    self.occupancy.started()
                    idle.send(ready.pop(0), "measure")     # built here already: verify and profile
                for w in [w for w in self.workers if w.job is not None]:
                    r = self._ended(w, measure_s)
                    if r is not None:
                        on_result(r)
                        since_ask = True
                self.in_flight = len(building) + sum(w.job is not None for w in self.workers)
                progress.show(running=self.in_flight, busy=self.occupancy.line() if offer else None)
                time.sleep(ctx.poll_s)
        except BaseException:
            stop_builds.set()      # now, before the pool's next queued build starts its make (cancel() comes after)
            for w in self.workers:
                w.close()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        for w in self.workers:
            workers.keep(w)        # the next dispatch (the race, the confirmations) takes them
        progress.show(busy=self.occupancy.line() if offer else None)

    def _record(self, line: dict[str, Any]) -> None:
        """A line of the hand-over log; a log that cannot be written costs the sweep nothing."""
        if self._log is None:
            return
        try:
            with open(self._log, "a") as f:
                f.write(json.dumps(line) + "\n")
        except OSError:
            self._log = None

    def _spawn(self, offer: dict[str, Any], folder: Path) -> Worker:
        w = workers.reuse(offer, job_environment())
        if w is None:
            w = Worker(offer, folder / f"worker{self._started}.log", job_environment())
            self._started += 1
        self.workers.append(w)
        return w

    def _ended(self, w: Worker, measure_s: list[float]) -> JobResult | None:
        """The result of the worker's job once it ended (its own, or one recorded for it), else None.
        A worker that died, or whose job overran its time limit, is replaced by a fresh one."""
        got = w.reply()
        j = w.job
        if got is False:
            limit = self.ctx.space.slurm.time_min * 60 + group.GRACE_S + 60
            if time.monotonic() - w.sent < limit:
                return None
            w.interrupt()          # the job's own deadline should have ended it: its programs go with it
            self.workers.remove(w)
            return record_lost(j, f"the job did not end within its {self.ctx.space.slurm.time_min}-minute time limit "
                                  "(slurm.time_min); its process was stopped", w.log, Status.TIMEOUT)
        w.job = None
        if got is None or "result" not in got:
            self.workers.remove(w)
            why = got.get("error") if isinstance(got, dict) else process_failure(w.log)
            return record_lost(j, f"the job process failed: {why}", w.log)
        result = JobResult.from_dict(got["result"])
        self.ran_on[result.tag] = got["gpu"]
        self._record({"tag": j.tag, "gpu": got["gpu"], "ready": self._ready_at.pop(j.tag, None), "sent": w.sent_at,
                      **{k: got.get(k) for k in ("received", "admitted", "ended")},
                      "worker_started": w.started_at, "worker_jobs_before": w.done})
        self.occupancy.ended(got["gpu"], result.intervals, got.get("ended"), started=got.get("received", 0) - w.sent_at,
                             first=w.done == 0)
        w.done += 1
        cost = gpu_cost_s(result)
        if cost is not None:
            measure_s.append(cost)
        return result


def process_failure(log: Path | str) -> str:
    """The telling line of a worker that died: the last exception line of its log (e.g.
    ModuleNotFoundError: No module named 'sweep'), else "it exited"."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    found = [l.strip() for l in lines if EXCEPTION_LINE.match(l.strip())]
    return (found[-1] if found else "it exited")[:300]


EXECUTOR = LocalExecutor
