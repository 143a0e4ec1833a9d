"""Dispatch rendered jobs through submitit, resumably.

Executors (--executor):
    debug   in-process, one job after another (submitit's DebugExecutor): for
            stepping through a job with a debugger
    local   this machine: builds run in parallel on the CPUs while measurements
            run one job per visible GPU (a submitit LocalExecutor per GPU); jobs
            outlive the driver, so a killed driver loses nothing
    slurm   one job array per batch, submitted in one sbatch call, at most
            slurm.array_parallelism tasks at once; the driver polls the
            scheduler once per interval for the whole array (see sweep.slurm)

Resume: a job whose result.json carries its current config hash is done and is
not run again; failed ones run again only with retry_failed, and not after
failing the same way twice. A job another driver started (state.json with a
live pid, or a queued Slurm task recorded in _dispatch/) is waited for, not
started twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from sweep.errors import SweepError
from sweep.job import FAILED, Job, JobResult, read_result, run_job
from sweep.profile import Measurement
from sweep.render import JobConfig
from sweep.space import Space

EXECUTORS = ("local", "debug", "slurm")


@dataclass(frozen=True, slots=True)
class PendingJob:
    tag: str
    dir: Path
    config_hash: str


def objective_ns(space: Space, measurements: Iterable[Measurement]) -> float:
    """The summed per-iteration time of every kernel the space's parameters govern
    (what model-based search minimizes; every launch shape counted)."""
    total = 0.0
    for m in measurements:
        if any(p.governs(m.kernel) for p in space.parameters):
            total += m.total_median_ns
    return total


def should_run(job_dir: Path, config_hash: str, retry_failed: bool) -> tuple[bool, str]:
    """(run it?, why not) for a job folder, from its result.json alone."""
    r = read_result(job_dir)
    if r is None or r.config_hash != config_hash:
        return True, ""
    if r.status in ("ok", "skipped"):
        return False, "done"
    if r.status in FAILED and retry_failed:
        same = [h for h in r.history if (h.get("status"), h.get("stage"), h.get("reason")) == (r.status, r.stage, r.reason)]
        if same:
            return False, f"failed the same way twice ({r.status}: {r.reason}); not retried again"
        return True, ""
    return False, f"{r.status} (use --retry-failed to run it again)" if r.status in FAILED else r.status


def running_elsewhere(job_dir: Path) -> bool:
    """True while another process on this host is working on the job (state.json's pid alive)."""
    try:
        import json

        st = json.loads((job_dir / "state.json").read_text())
    except (OSError, ValueError):
        return False
    if st.get("host") != os.uname().nodename:
        return bool(st.get("slurm_job"))  # on another node: the Slurm watcher decides
    try:
        os.kill(int(st.get("pid", 0)), 0)
        return True
    except (OSError, ValueError):
        return False


# ---------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------


class Progress:
    """One status line: done / failed / running / queued and elapsed time."""

    def __init__(self, sweep: str, total: int, stream=sys.stderr):
        self.sweep, self.total, self.stream = sweep, total, stream
        self.t0 = time.monotonic()
        self.counts: dict[str, int] = {}
        self.running = 0
        self.last = ""
        self.tty = hasattr(stream, "isatty") and stream.isatty()

    def finished(self, result: JobResult) -> None:
        self.counts[result.status] = self.counts.get(result.status, 0) + 1
        if result.status not in ("ok", "skipped"):
            where = f" -> {result.log}" if result.log else ""
            self._print(f"  {result.tag}: {result.status} ({result.stage}: {result.reason}){where}", newline=True)
        self.show()

    def show(self, running: int | None = None) -> None:
        if running is not None:
            self.running = running
        done = sum(self.counts.values())
        failed = sum(v for k, v in self.counts.items() if k in FAILED)
        skipped = self.counts.get("skipped", 0)
        el = int(time.monotonic() - self.t0)
        line = (f"[{self.sweep}] {done}/{self.total} done (ok {self.counts.get('ok', 0)}, failed {failed}, "
                f"skipped {skipped}) | {self.running} running | {max(0, self.total - done - self.running)} queued | "
                f"{el // 60}:{el % 60:02d}")
        if line != self.last:
            self._print(line, newline=not self.tty)
            self.last = line

    def _print(self, text: str, newline: bool) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if newline else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


# ---------------------------------------------------------------------------
# Executors
# ---------------------------------------------------------------------------


def visible_gpus() -> list[int]:
    """Indices of the GPUs this process may use (CUDA_VISIBLE_DEVICES, else nvidia-smi)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [int(x) for x in env.split(",") if x.strip().isdigit()]
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    r = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split() if x.strip().isdigit()] if r.returncode == 0 else []


def run_debug(jobs: list[PendingJob], stages: str, progress: Progress, on_result: Callable[[JobResult], None],
              folder: Path) -> None:
    import submitit

    ex = submitit.DebugExecutor(folder=str(folder))
    for j in jobs:
        progress.show(running=1)
        result = JobResult.from_dict(ex.submit(run_job, str(j.dir), stages).result())
        progress.show(running=0)
        on_result(result)


def run_local(jobs: list[PendingJob], stages: str, progress: Progress, on_result: Callable[[JobResult], None],
              folder: Path, *, gpus: list[int] | None = None, build_parallel: int = 0, timeout_min: int = 60,
              poll_s: float = 0.5, ready_to_measure: Callable[[], bool] = lambda: True) -> None:
    """Builds on a CPU pool; measures with one submitit LocalExecutor per GPU, one job per GPU at a time.
    `ready_to_measure` holds measuring back (the model export runs while the builds do)."""
    import submitit

    cpus = len(os.sched_getaffinity(0))
    build_parallel = build_parallel or max(1, min(len(jobs), cpus // 4 or 1))
    gpus = visible_gpus() if gpus is None else gpus
    if stages != "build" and not gpus:
        raise SweepError("no GPU visible here (nvidia-smi finds none, or CUDA_VISIBLE_DEVICES is empty): "
                         "run on a GPU node, use --executor slurm, or --dry-run to only render and compile")
    executors = {}
    for g in gpus:
        ex = submitit.LocalExecutor(folder=str(folder / f"gpu{g}"))
        ex.update_parameters(timeout_min=timeout_min, gpus_per_node=1, visible_gpus=(g,))
        executors[g] = ex

    queued = list(jobs)
    ready: list[PendingJob] = []
    building: dict[Future, PendingJob] = {}
    # Two jobs per GPU: one measuring, the next already started and waiting on the
    # GPU's lock (sweep.job.gpu_lock), so process start-up and the last profile's
    # post-processing overlap GPU time while measurements stay exclusive.
    measuring: dict[int, list[tuple[object, PendingJob]]] = {g: [] for g in gpus}
    folder.mkdir(parents=True, exist_ok=True)
    pool = ThreadPoolExecutor(max_workers=build_parallel)

    # make -j shares the CPUs among the builds running at once
    os.environ["SWEEP_BUILD_JOBS"] = str(max(1, cpus // build_parallel))

    def build_one(j: PendingJob) -> JobResult | None:
        result = Job(j.dir).run("build")
        return None if (result.status == "ok" and stages != "build") else result

    try:
        while queued or building or ready or any(measuring.values()):
            while queued and len(building) < build_parallel:
                j = queued.pop(0)
                building[pool.submit(build_one, j)] = j
            for fut in [f for f in building if f.done()]:
                j = building.pop(fut)
                result = fut.result()
                if result is None:
                    ready.append(j)
                else:  # a failed build, or a dry run's end
                    on_result(result)
            for g in gpus if ready and ready_to_measure() else ():
                while ready and len(measuring[g]) < 2:
                    j = ready.pop(0)
                    os.environ["SWEEP_GPU_LOCK"] = str(folder / f"gpu{g}.lock")  # the job's environment, copied at submit
                    try:
                        measuring[g].append((executors[g].submit(run_job, str(j.dir), "measure"), j))
                    finally:
                        os.environ.pop("SWEEP_GPU_LOCK", None)
            for g in gpus:
                for entry in [e for e in measuring[g] if e[0].done()]:
                    measuring[g].remove(entry)
                    sjob, j = entry
                    try:
                        on_result(JobResult.from_dict(sjob.result()))
                    except Exception as e:  # the job process died: keep a record, go on
                        on_result(_lost(j, f"the job process failed: {str(e).strip().splitlines()[-1][:200]}",
                                        sjob.paths.stderr))
            progress.show(running=len(building) + sum(len(v) for v in measuring.values()))
            time.sleep(poll_s)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _lost(j: PendingJob, reason: str, log: Path | str = "", status: str = "runtime_failed", stage: str = "job") -> JobResult:
    """Records (and returns) the result of a job that ended without writing its own:
    its process died, or the scheduler ended it."""
    from sweep.job import _now, write_result

    cfg = JobConfig.load(j.dir)
    previous = read_result(j.dir)
    history = ()
    if previous and previous.config_hash == cfg.config_hash:
        history = previous.history + ({"status": previous.status, "stage": previous.stage, "reason": previous.reason},)
    r = JobResult(sweep=cfg.sweep, tag=cfg.tag, config_hash=cfg.config_hash, macros=cfg.macros, status=status,
                  stage=stage, reason=reason, log=str(log), role=cfg.role, history=history, finished_at=_now())
    write_result(j.dir, r)
    (j.dir / "state.json").unlink(missing_ok=True)
    return r
