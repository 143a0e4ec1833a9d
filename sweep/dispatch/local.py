"""The local executor: this machine's CPUs build, its GPUs measure, one job per GPU.

Builds run in a thread pool (make -j shares the CPUs among them). Measurements
run through one submitit LocalExecutor per visible GPU (CUDA_VISIBLE_DEVICES
set to it), two jobs per GPU at a time: one measuring, the next already started
and waiting on the GPU's lock (sweep.node.gpus: one per GPU for the whole node,
every sweep's), so process start-up and the last profile's post-processing
overlap GPU time while measurements stay exclusive. Jobs are processes of their
own: a killed driver loses nothing.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from sweep.core.errors import SweepError
from sweep.dispatch import (Context, Executor, OnResult, PendingJob, job_environment, last_line, record_lost,
                             visible_gpus)
from sweep.node import gpus, group
from sweep.node.job import Job, run_job
from sweep.dispatch.progress import Progress
from sweep.records import JobResult, Status

JOBS_PER_GPU = 2
IGNORE_INT = "trap '' INT"     # a fixed string: nothing a user typed reaches this shell
EXCEPTION_LINE = re.compile(r"^\w+(Error|Exception|Interrupt|Exit)\b.*")


def no_gpu_message() -> str:
    return ("no GPU visible here (nvidia-smi finds none, or CUDA_VISIBLE_DEVICES is empty): run on a GPU node, use "
            "--executor slurm from a login node, or --dry-run to only render and compile")


ASK_PER_GPU = 4     # jobs a learning strategy is asked for at once, a GPU (parallelism)


class LocalExecutor(Executor):
    name = "local"
    doc = "this machine: builds on the CPUs, measurements one job per visible GPU"

    def __init__(self, ctx: Context, gpus: list[str] | None = None, build_parallel: int = 0):
        super().__init__(ctx)
        self.gpus = visible_gpus() if gpus is None else gpus
        self.build_parallel = build_parallel
        self.queued: list[PendingJob] = []
        self.stages = "all"
        self._submitted: list[Any] = []
        self.in_flight = 0          # jobs building or measuring (the last look)
        self.stopped = 0

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

    def parallelism(self) -> int:
        """Jobs a learning strategy is asked for at once: ASK_PER_GPU a GPU, so their builds run
        in parallel on the CPUs while the GPU measures one after another (each waits at its GPU's
        lock); asked one a GPU, a learning sweep built and measured one configuration at a time."""
        return max(1, len(self.gpus)) * ASK_PER_GPU

    def submit(self, jobs: list[PendingJob], stages: str) -> None:
        if stages != "build" and not self.gpus:
            raise SweepError(no_gpu_message())
        self.queued.extend(jobs)
        self.stages = stages

    def cancel(self) -> None:
        """Ctrl-C: each running job process gets SIGINT (it leaves no result and kills its programs;
        the next run measures it); the controllers, which ignore it, end with their jobs."""
        self.stopped = self.in_flight
        jobs = [pid for sjob in self._submitted if not sjob.done() for pid in job_processes(int(sjob.job_id))]
        for pid in jobs:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + group.GRACE_S + 10
        while any(not s.done() for s in self._submitted) and time.monotonic() < deadline:
            time.sleep(0.1)

    def interrupted(self) -> str:
        return f"interrupted: stopped {self.stopped} running job(s); the same command resumes"

    def watch(self, on_result: OnResult, progress: Progress) -> None:
        import submitit

        ctx, stages = self.ctx, self.stages
        folder = ctx.sweep_dir / "_dispatch"
        folder.mkdir(parents=True, exist_ok=True)
        cpus = len(os.sched_getaffinity(0))
        build_parallel = self.build_parallel or max(1, min(len(self.queued), cpus // 4 or 1))
        build_jobs = max(1, cpus // build_parallel)     # make -j shares the CPUs among the builds at once
        executors, locks = {}, self.lock_paths()
        for i, g in enumerate(self.gpus):
            ex = submitit.LocalExecutor(folder=str(folder / f"gpu{i}"))
            # The controller ignores Ctrl-C (it printed a KeyboardInterrupt traceback each); its job
            # takes it (local_job) and stops, killing its programs. submitit takes GPU indices only:
            # a UUID (GPU-..., MIG-..., checked by gpus.visible) is exported before the job starts.
            setup = [IGNORE_INT] + ([] if g.isdigit() else [f"export CUDA_VISIBLE_DEVICES={shlex.quote(g)}"])
            ex.update_parameters(timeout_min=ctx.space.slurm.time_min, gpus_per_node=1 if g.isdigit() else 0,
                                 visible_gpus=(int(g),) if g.isdigit() else (), setup=setup)
            executors[g] = ex

        ready: list[PendingJob] = []
        building: dict[Future, PendingJob] = {}
        measuring: dict[str, list[tuple[Any, PendingJob]]] = {g: [] for g in self.gpus}
        pool = ThreadPoolExecutor(max_workers=build_parallel)

        def build_one(j: PendingJob) -> JobResult | None:
            result = Job(j.dir, build_jobs=build_jobs).run("build")
            return None if (result.status == Status.OK and stages != "build") else result

        try:
            while self.queued or building or ready or any(measuring.values()):
                while self.queued and len(building) < build_parallel:
                    j = self.queued.pop(0)
                    building[pool.submit(build_one, j)] = j
                for fut in [f for f in building if f.done()]:
                    j = building.pop(fut)
                    result = fut.result()
                    if result is None:
                        ready.append(j)
                    else:  # a failed build, or a dry run's end
                        on_result(result)
                while ready and ctx.ready_to_measure():
                    g = min(self.gpus, key=lambda g: len(measuring[g]))   # the least busy GPU first
                    if len(measuring[g]) >= JOBS_PER_GPU:
                        break
                    j = ready.pop(0)
                    with environment(job_environment()):  # submitit copies the environment at submit
                        sjob = executors[g].submit(local_job, str(j.dir), "measure", gpu_lock_path=str(locks[g]))
                    self._submitted.append(sjob)
                    measuring[g].append((sjob, j))
                for g in self.gpus:
                    for entry in [e for e in measuring[g] if e[0].done()]:
                        measuring[g].remove(entry)
                        on_result(_outcome(*entry))
                self.in_flight = len(building) + sum(len(v) for v in measuring.values())
                progress.show(running=self.in_flight)
                time.sleep(ctx.poll_s)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


def local_job(job_dir: str, stages: str, gpu_lock_path: str | None = None) -> dict[str, Any]:
    """run_job in a local job process: Ctrl-C (SIGINT, ignored by its controller and so by it at
    start) interrupts it again."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return run_job(job_dir, stages, gpu_lock_path=gpu_lock_path)


def job_processes(root: int) -> list[int]:
    """The submitit job processes under a controller (its descendants running submitit.core._submit), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            if b"submitit.core._submit" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            pass
    return out


@contextmanager
def environment(extra: dict[str, str]) -> Iterator[None]:
    """os.environ with `extra` for the duration (the driver's own environment is left as it was)."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _outcome(sjob: Any, j: PendingJob) -> JobResult:
    try:
        return JobResult.from_dict(sjob.result())
    except Exception as e:  # the job process died: keep a record naming why, go on
        return record_lost(j, f"the job process failed: {process_failure(e, sjob.paths.stderr)}", sjob.paths.stderr)


def process_failure(error: BaseException, stderr: Path | str) -> str:
    """The telling line of a job process that died: the last exception line of its
    stderr (e.g. ModuleNotFoundError: No module named 'sweep'), else the error's own."""
    try:
        lines = Path(stderr).read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    found = [l.strip() for l in lines if EXCEPTION_LINE.match(l.strip())]
    return (found[-1] if found else last_line(str(error)) or type(error).__name__)[:300]


EXECUTOR = LocalExecutor
