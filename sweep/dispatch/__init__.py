"""Executors: where jobs run. One interface, three implementations, one registry.

    debug   in-process, one job after another (submitit's DebugExecutor): for
            stepping through a job with a debugger
    replay  no GPU: each configuration answered from a recording (--from FILE: a
            Kernel Tuner cache, T4 results, an earlier sweep; sweep.dispatch.replay)
    local   this machine: builds run in parallel on the CPUs while every visible
            GPU measures, each job on the first GPU that frees (long-lived worker
            processes, sweep.dispatch.workers); a killed driver loses nothing
    slurm   job arrays that fit the cluster's limits (MaxArraySize, the submit
            limit), at most slurm.array_parallelism tasks at once; the driver
            polls the scheduler once per interval for all of them

An Executor is made for one sweep (`Context`); `preflight` checks here, before
anything is rendered, what it needs; `submit` hands it jobs, `watch` blocks until
each has ended and reports each JobResult once; `cancel` stops what is still
running. `parallelism` says how many configurations the driver asks a strategy
for at a time; `stream` runs a strategy's configurations as it hands them over,
asking for more as jobs end (the local and Slurm executors: more each time one
ends; the others batch by batch).

Resume (`should_run`): a job whose result.json carries its current config hash
is done and is not run again; failed ones run again only with retry_failed, and
not after failing the same way twice. A job another driver started (state.json
with a live pid, or a queued Slurm task) is waited for, not started twice.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import socket
import subprocess
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Iterator

from sweep.core import paths
from sweep.core.errors import SweepError
from sweep.node import gpus
from sweep.node.lock import pid_alive
from sweep.dispatch.progress import Progress
from sweep.records import FAILED, JobConfig, JobResult, Status, read_result, write_result
from sweep.space import Space

OnResult = Callable[[JobResult], None]
INTERRUPTED = "interrupted: what ran is kept; run the same command again to resume"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while an executor watched its jobs; args[0] says what became of them (the executor's word)."""

Ask = Callable[[int], "list[PendingJob]"]


@dataclass(frozen=True, slots=True)
class PendingJob:
    tag: str
    dir: Path
    config_hash: str
    partition: str = ""   # the Slurm partition it must run on (slurm.partitions); "": slurm.partition


@dataclass(frozen=True, slots=True)
class Context:
    """What an executor knows of the sweep it runs."""

    space: Space
    sweep_dir: Path
    poll_s: float = 0.5
    ready_to_measure: Callable[[], bool] = field(default=lambda: True)   # the target's prepare step is done
    dry_run: bool = False
    replay_from: Path | None = None      # the replay executor's recording (--from)


class Executor(ABC):
    name: ClassVar[str]
    doc: ClassVar[str]
    # True: the executor finds a job an earlier driver started (and that still runs) itself and
    # watches it; False: the driver leaves out a job whose state.json names a live process
    finds_running: ClassVar[bool] = False

    def __init__(self, ctx: Context):
        self.ctx = ctx

    @classmethod
    def preflight(cls, space: Space, dry_run: bool) -> None:
        """Raise SweepError naming what this executor needs and cannot find here."""

    def parallelism(self) -> int:
        return 1

    @abstractmethod
    def submit(self, jobs: list[PendingJob], stages: str) -> None:
        """Hand jobs over (stages: all | build | measure)."""

    @abstractmethod
    def watch(self, on_result: OnResult, progress: Progress) -> None:
        """Block until every submitted job has ended, reporting each result once."""

    def cancel(self) -> None:
        """Stop what is still queued or running (the driver was interrupted)."""

    def interrupted(self) -> str:
        """What became of the jobs once cancel() ran after an interrupt: the line the CLI prints."""
        return INTERRUPTED

    def run(self, jobs: list[PendingJob], stages: str, on_result: OnResult, progress: Progress) -> None:
        if not jobs:
            return
        self.submit(jobs, stages)
        with self.interruptible():
            self.watch(on_result, progress)

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Whatever ends the watch stops the jobs (cancel); Ctrl-C becomes Interrupted with the
        executor's word on what became of them."""
        try:
            yield
        except Interrupted:
            raise
        except KeyboardInterrupt:
            self.cancel()
            raise Interrupted(self.interrupted()) from None
        except BaseException:
            self.cancel()
            raise

    def stream(self, ask: Ask, stages: str, on_result: OnResult, progress: Progress) -> None:
        """Run what `ask(n)` hands over (up to n jobs; [] when it has no more), asking again as
        jobs end, until it has no more and every job has ended. Here batch by batch: every job
        of a batch ends before the next batch is asked for. An executor that can start jobs
        while others run overrides it, keeping parallelism() jobs in flight (Slurm)."""
        while jobs := ask(self.parallelism()):
            self.run(jobs, stages, on_result, progress)


def registry() -> dict[str, type[Executor]]:
    out = {}
    for module in ("local", "slurm", "debug", "replay"):
        cls = importlib.import_module(f"sweep.dispatch.{module}").EXECUTOR
        out[cls.name] = cls
    return out


EXECUTORS = ("local", "slurm", "debug", "replay")


def executor(name: str) -> type[Executor]:
    reg = registry()
    if name not in reg:
        raise SweepError(f"--executor {name!r}: choose one of {', '.join(reg)}")
    return reg[name]


# ---------------------------------------------------------------------------
# Shared by the executors
# ---------------------------------------------------------------------------


def should_run(job_dir: Path, config_hash: str, retry_failed: bool) -> tuple[bool, str]:
    """(run it?, why not) for a job folder, from its result.json alone."""
    r = read_result(job_dir)
    if r is None or r.config_hash != config_hash:
        return True, ""
    if r.status in (Status.OK, Status.SKIPPED):
        return False, "done"
    if r.status in FAILED and retry_failed:
        if r.summary() in r.history:
            return False, f"failed the same way twice ({r.status}: {r.reason}); not retried again"
        return True, ""
    return False, f"{r.status} (use --retry-failed to run it again)" if r.status in FAILED else str(r.status)


def running_elsewhere(job_dir: Path) -> bool:
    """True while another process on this host is working on the job (state.json's pid alive)."""
    try:
        st = json.loads((Path(job_dir) / "state.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(st, dict):
        return False
    if st.get("host") != socket.gethostname():
        return bool(st.get("slurm_job"))  # on another node: the Slurm watcher decides
    return pid_alive(st.get("pid"))


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (indices, GPU-<uuid>,
    MIG-<uuid>), else nvidia-smi's indices."""
    named = gpus.visible()
    if named is not None:
        return named
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    r = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True)
    return [x.strip() for x in r.stdout.split() if x.strip().isdigit()] if r.returncode == 0 else []


def record_lost(j: PendingJob, reason: str, log: Path | str = "", status: Status = Status.RUNTIME_FAILED,
                stage: str = "job") -> JobResult:
    """Records (and returns) the result of a job that ended without writing its own:
    its process died, or the scheduler ended it."""
    r = JobResult.ended(JobConfig.load(j.dir), status, stage, reason, log, previous=read_result(j.dir))
    write_result(j.dir, r)
    (j.dir / "state.json").unlink(missing_ok=True)
    return r


def last_line(text: str, limit: int = 200) -> str:
    """The last non-empty line of an exception's text or a log: what a job's reason shows."""
    lines = [l.strip() for l in str(text).strip().splitlines() if l.strip()]
    return lines[-1][:limit] if lines else ""


def job_environment() -> dict[str, str]:
    """What a job process needs to import the framework whatever its working directory
    and however the framework was installed."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    root = str(paths.IMPORT_ROOT)
    return {"PYTHONPATH": os.pathsep.join(parts if root in parts else [root, *parts])}
