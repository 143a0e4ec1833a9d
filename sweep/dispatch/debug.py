"""The debug executor: in-process, one job after another (submitit's DebugExecutor),
for stepping through a job with a debugger. Needs a GPU, as the local one does, and measures
under the node-wide lock of its GPU (CUDA_VISIBLE_DEVICES' first) as the local one does."""

from __future__ import annotations

from sweep.dispatch import Executor, OnResult, PendingJob
from sweep.dispatch.local import LocalExecutor
from sweep.node import gpus
from sweep.node.job import run_job
from sweep.dispatch.progress import Progress
from sweep.records import JobResult


class DebugExecutor(Executor):
    name = "debug"
    doc = "in-process, one job after another (for a debugger)"
    preflight = LocalExecutor.preflight

    def __init__(self, ctx):
        super().__init__(ctx)
        self.queued: list[PendingJob] = []
        self.stages = "all"

    def submit(self, jobs: list[PendingJob], stages: str) -> None:
        self.queued.extend(jobs)
        self.stages = stages

    def watch(self, on_result: OnResult, progress: Progress) -> None:
        import submitit

        ex = submitit.DebugExecutor(folder=str(self.ctx.sweep_dir / "_dispatch"))
        lock = None if self.stages == "build" else gpus.own_lock_path()
        while self.queued:
            j = self.queued.pop(0)
            progress.show(running=1)
            result = JobResult.from_dict(ex.submit(run_job, str(j.dir), self.stages,
                                                         gpu_lock_path=str(lock) if lock else None).result())
            progress.show(running=0)
            on_result(result)


EXECUTOR = DebugExecutor
