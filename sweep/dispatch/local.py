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
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from sweep.core.errors import SweepError
from sweep.dispatch import (Context, Executor, OnResult, PendingJob, job_environment, last_line, record_lost,
                             visible_gpus)
from sweep.node import gpus
from sweep.node.job import Job, run_job
from sweep.dispatch.progress import Progress
from sweep.records import JobResult, Status

JOBS_PER_GPU = 2
EXCEPTION_LINE = re.compile(r"^\w+(Error|Exception|Interrupt|Exit)\b.*")


def no_gpu_message() -> str:
    return ("no GPU visible here (nvidia-smi finds none, or CUDA_VISIBLE_DEVICES is empty): run on a GPU node, use "
            "--executor slurm from a login node, or --dry-run to only render and compile")


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
        return max(1, len(self.gpus))

    def submit(self, jobs: list[PendingJob], stages: str) -> None:
        if stages != "build" and not self.gpus:
            raise SweepError(no_gpu_message())
        self.queued.extend(jobs)
        self.stages = stages

    def cancel(self) -> None:
        for sjob in self._submitted:
            if not sjob.done():
                sjob.cancel(check=False)

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
            if g.isdigit():
                ex.update_parameters(timeout_min=ctx.space.slurm.time_min, gpus_per_node=1, visible_gpus=(int(g),))
            else:   # submitit takes indices only: a UUID (GPU-..., MIG-...) is exported before the job starts
                ex.update_parameters(timeout_min=ctx.space.slurm.time_min, gpus_per_node=0,
                                     setup=[f"export CUDA_VISIBLE_DEVICES={shlex.quote(g)}"])
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
                for g in self.gpus if ready and ctx.ready_to_measure() else ():
                    while ready and len(measuring[g]) < JOBS_PER_GPU:
                        j = ready.pop(0)
                        with environment(job_environment()):  # submitit copies the environment at submit
                            sjob = executors[g].submit(run_job, str(j.dir), "measure",
                                                       gpu_lock_path=str(locks[g]))
                        self._submitted.append(sjob)
                        measuring[g].append((sjob, j))
                for g in self.gpus:
                    for entry in [e for e in measuring[g] if e[0].done()]:
                        measuring[g].remove(entry)
                        on_result(_outcome(*entry))
                progress.show(running=len(building) + sum(len(v) for v in measuring.values()))
                time.sleep(ctx.poll_s)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


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
