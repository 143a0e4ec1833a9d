"""How a job holds its GPU while it measures: the whole run (exclusive) or only around
its program's GPU work (overlap).

    mode(profile, lock, devices)   "overlap" where it is safe: the cupti backend (its injection
                                   library keeps the token), profile.overlap not turned off, a
                                   node-wide GPU lock to take turns on, and one GPU for the job;
                                   else "exclusive": nsys, ncu and events hold the GPU for the
                                   whole run, as every backend did before
    measure(job)                   verify and profile under that mode; returns the profiled runs
    context_mode(env)              how overlap-mode programs create their CUDA contexts: "gate"
                                   (the default), "token" or "beside" (SWEEP_GPU_TOKEN_CONTEXT)
    holding(lock)                  registers this job as a holder of the GPU beside its lock
    repeat_slots(lock)             how many of one job's repeated runs may run at once in overlap mode
    out_of_memory(error)           a run that failed for want of GPU memory (beside other programs)
    foreign(lock)                  who else is on the GPU (NVML) less the holders' processes

Overlap mode. The program runs with SWEEP_GPU_TOKEN naming the GPU's lock file, and the
CUPTI library in it (sweep/profile/cupti_token.h) takes that lock at every call that puts
work on the GPU and gives it back once the queue drained and the program is in host code.
Exclusive jobs hold the same file for their whole run, so no GPU work of any sweep on the
node overlaps another's measurement; host work (set-up, rand() fills, CPU checks) overlaps
freely. A separate verify command runs holding the whole lock: it runs without the library
(it may be any program the target names, even one that clears its environment), and
holding the lock is what is certain for it; `verify: profile` targets check inside the
profiled run and pay nothing.

Other processes. NVML lists every process with a context on the GPU; in overlap mode that
includes the other jobs' programs, which may sit waiting for the token. Each job, in either
mode, writes `<lock file>.<pid>.holder` beside the lock while it measures, and a process on
the GPU whose parent chain reaches a registered, live job is a cooperating one: it takes the
lock before its GPU work or runs under a job that holds it. Any other process (a training
run, a notebook, a sweep of an older version) is still reported (gpus.exclusive).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Callable

from sweep.node import gpus
from sweep.node.process import JobFailed, gpu_lock

OVERLAP, EXCLUSIVE = "overlap", "exclusive"
CONTEXT_ENV = "SWEEP_GPU_TOKEN_CONTEXT"   # read by the CUPTI library in each program (cupti_inject.cpp)
HOLDER = ".holder"
OUT_OF_MEMORY = "out of memory"     # cudaErrorMemoryAllocation's text, as a failed run's reason carries it


def mode(profile: Mapping[str, Any], lock: str | Path | None, devices: list[str] | None) -> str:
    """The job's mode (see the module's docstring)."""
    safe = (profile.get("backend") == "cupti" and bool(profile.get("overlap", True)) and bool(lock)
            and devices is not None and len(devices) == 1)
    return OVERLAP if safe else EXCLUSIVE


def context_mode(env: Mapping[str, str] | None = None) -> str:
    """How the CUPTI library creates each program's CUDA context in overlap mode, as it reads
    SWEEP_GPU_TOKEN_CONTEXT: "gate" (unset or gate: beside the other programs' GPU work, one
    context at a time on the node), "beside" (0: no gate) or "token" (1, or any other value:
    under the GPU's token)."""
    value = (os.environ if env is None else env).get(CONTEXT_ENV) or "gate"
    return {"gate": "gate", "0": "beside"}.get(value, "token")


def measure(job: Any) -> list[Any]:
    """The job's verify and profiled runs under its mode; env["gpu_mode"] says which, and the
    job's "gpu" interval is its measuring phase (in overlap mode shared with other jobs: its
    GPU-seconds are its share of that time, sweep.records.gpu_time)."""
    how = mode(job.cfg.profile, job.gpu_lock_path, gpus.visible())
    job.env["gpu_mode"] = how
    if how == OVERLAP:
        job.env["gpu_contexts"] = context_mode()
    users = foreign(job.gpu_lock_path) if job.gpu_lock_path else None
    start: list[float | None] = [time.time()]    # from the lock taken: a job waiting at it is not measuring yet
    try:
        with holding(job.gpu_lock_path):
            if how == EXCLUSIVE:
                with gpu_lock(job.gpu_lock_path):
                    start[0] = time.time()
                    try:
                        job.verify()
                        return gpus.exclusive(job.capture, job.env, users)   # repeated once if shared
                    finally:     # marked before the lock goes: the next job's interval starts after it
                        job.mark("gpu", start[0])
                        start[0] = None
            with gpu_lock(job.gpu_lock_path):
                start[0] = time.time()
                job.verify()
            job.gpu_token = Path(job.gpu_lock_path)
            try:
                return gpus.exclusive(job.capture, job.env, users)
            except JobFailed as f:
                if not out_of_memory(f):
                    raise
            finally:
                job.gpu_token = None
            # Out of GPU memory beside the other programs' contexts: measured again alone, as
            # exclusive mode would have, so a configuration never fails for sharing the GPU.
            job.env.update(gpu_mode=EXCLUSIVE, gpu_mode_note="ran out of GPU memory beside other programs "
                                                             "in overlap mode: measured again alone")
            with gpu_lock(job.gpu_lock_path):
                return gpus.exclusive(job.capture, job.env, users)
    finally:
        if start[0] is not None:
            job.mark("gpu", start[0])    # the measuring phase: verify and profile


def out_of_memory(error: BaseException) -> bool:
    """A run that failed for want of GPU memory: in overlap mode, possibly only for sharing the GPU."""
    return isinstance(error, JobFailed) and OUT_OF_MEMORY in error.reason.lower()


def repeat_slots(lock: str | Path, cpus: int | None = None) -> int:
    """How many of one job's repeated runs may run at once in overlap mode (sweep.node.sampling):
    the CPUs this process may use shared evenly among the jobs measuring on the node now (the live
    holders beside every GPU lock in the lock's folder, this job among them: each job's runs need
    a core for their host work, as measuring_slots gives each job one), and at most
    MAX_OVERLAP_SLOTS programs on this GPU in all (measuring_slots' memory guard: every program
    waiting for the token keeps its context there). At least 1: a job alone in a crowded node
    repeats one run after another, as in exclusive mode."""
    lock = Path(lock)
    cpus = cpus if cpus is not None else len(os.sched_getaffinity(0))
    on_node = _live_holders(lock.parent.glob(f"*{HOLDER}"))
    on_gpu = holders(lock)
    return max(1, min(cpus // max(len(on_node), 1), gpus.MAX_OVERLAP_SLOTS // max(len(on_gpu), 1)))


class holding:
    """`<lock>.<pid>.holder` beside the GPU's lock while this job measures (None: no lock, nothing)."""

    def __init__(self, lock: str | Path | None):
        self.path = Path(f"{lock}.{os.getpid()}{HOLDER}") if lock else None

    def __enter__(self) -> "holding":
        if self.path is not None:
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))
            except OSError:
                self.path = None     # no registration: this job's programs may be reported as others, never hidden
        return self

    def __exit__(self, *exc: object) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def holders(lock: str | Path) -> set[int]:
    """The live jobs registered beside `lock`."""
    lock = Path(lock)
    return _live_holders(lock.parent.glob(f"{lock.name}.*{HOLDER}"))


def _live_holders(files: Iterable[Path]) -> set[int]:
    """The live pids of `<lock>.<pid>.holder` files."""
    out = set()
    for f in files:
        parts = f.name[:-len(HOLDER)].rsplit(".", 1)
        if len(parts) == 2 and parts[1].isdigit() and _alive(int(parts[1])):
            out.add(int(parts[1]))
    return out


def foreign(lock: str | Path, users: Callable[[], set[int] | None] | None = None,
            parent: Callable[[int], int | None] | None = None) -> Callable[[], set[int] | None]:
    """gpus.exclusive's `users`: NVML's processes on the GPU (default gpus.others_on) less those
    under a registered job."""
    parent = parent or _parent

    def others() -> set[int] | None:
        seen = (users or gpus.others_on)()
        if not seen:
            return seen
        jobs = holders(lock)
        return {pid for pid in seen if not _under(pid, jobs, parent)}
    return others


def _under(pid: int, jobs: set[int], parent: Callable[[int], int | None]) -> bool:
    for _ in range(64):     # a parent chain is short; a loop in a bad /proc read ends here
        if pid in jobs:
            return True
        up = parent(pid)
        if up is None or up <= 1:
            return False
        pid = up
    return False


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()     # the command name may hold spaces and parentheses
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
