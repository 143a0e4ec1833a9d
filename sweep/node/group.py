"""A job's programs in a process group of their own, ended by the job's own deadline.

A program that never exits, or exits leaving a child that holds its stdout, used to hang
the job until the scheduler (or submitit) killed it: the record said "the job process
failed" and the program ran on with parent PID 1. Here each program starts a session of
its own (start_new_session) and its output is read with a deadline. When the deadline
passes, the whole group gets SIGTERM, then SIGKILL after GRACE_S (the job records
`timeout`); when the program exited but something it started still holds its output
LINGER_S later, that is killed so, and the program's own exit code and output stand (a
profiler's helper may linger so; failing the run for it would fail good measurements).
No process outlives its job.

    time_limit   the job's own deadline (this thread's), set where a job starts: the time
                 limit less a margin, so the job records `timeout` itself, before the
                 scheduler's signal
    remaining    seconds left of it (None: no deadline set)
    expire       end it now, for the whole process: the scheduler's warning came (its USR2
                 before the time limit, which Slurm may send up to a minute early): the
                 running program is killed as at its own deadline, so the job still records
                 `timeout` itself, with the stage's log and what the program printed
    run_group    runs one command so; says how it ended (Ended)
    end_marked   ends a program left in its caller's process group, and every process under it,
                 found by a mark in their environment (new_mark), orphans included
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

LINGER_S = 10.0     # a program exited: how long a process it left may still hold its output
GRACE_S = 5.0       # SIGTERM to SIGKILL
SCHEDULER_SIGNAL_S = 45.0   # the job's own deadline: this long before its limit (a scheduler's warning may come first: expire)

_clock = threading.local()
_expired = threading.Event()   # process-wide: a signal is the process's, not a thread's


def time_limit(seconds: float | None) -> None:
    """Start this thread's job deadline: `seconds` (the job's time limit) less the scheduler's margin."""
    if seconds is None:
        _clock.deadline = None
        return
    # time_min counts whole minutes: a limit under one is a test's or a caller's own, not a scheduler's
    margin = 0.0 if seconds < 60 else min(SCHEDULER_SIGNAL_S, seconds * 0.6)
    budget = seconds - margin
    _clock.deadline = time.monotonic() + budget


def remaining() -> float | None:
    if _expired.is_set():
        return 0.0
    deadline = getattr(_clock, "deadline", None)
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def expire() -> None:
    """End every job deadline of this process now (safe in a signal handler: it only sets a flag)."""
    _expired.set()


def expired() -> bool:
    return _expired.is_set()


@dataclass(frozen=True, slots=True)
class Ended:
    returncode: int
    stdout: bytes
    stderr: bytes
    why: str = ""        # "": it ended; "deadline": killed at its limit; "lingering": exited, its output held


class Proc(NamedTuple):
    group: int
    start: int     # clock ticks after boot: with the pid, tells a process from a later one given its pid
    state: str     # "Z": a zombie, ended and not yet reaped


def processes() -> dict[int, Proc]:
    """Every process, from /proc (one that ends while it is read is left out)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            out[int(entry.name)] = Proc(int(fields[2]), int(fields[19]), fields[0])
        except (OSError, IndexError, ValueError):
            continue
    return out


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group, from /proc."""
    return [pid for pid, proc in processes().items() if proc.state != "Z" and proc.group == pgid]


MARK = "SWEEP_PROCESS_MARK"   # in a program's environment: every process it starts inherits it


def new_mark() -> str:
    """A fresh value for MARK: the processes of one program, and only those, will carry it."""
    return uuid.uuid4().hex


def marked(mark: str) -> dict[int, int]:
    """The live processes whose environment holds MARK=mark (pid -> start time): a program and every
    process under it, found whether or not their parents live (an orphan's parent is 1; parent
    links cannot reach it). Another user's processes, and one that ends meanwhile, are left out."""
    needle = f"{MARK}={mark}".encode()
    found = {}
    for pid, proc in processes().items():
        if proc.state == "Z":
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found[pid] = proc.start
    return found


def end_marked(mark: str, grace_s: float | None = None) -> None:
    """SIGTERM to every process carrying MARK=mark, SIGKILL after grace_s to those left. For a program
    in its caller's own process group (make: a kill -9 of the driver's group must reach it), where
    killpg would reach the caller too, and for what it leaves when it exits: interrupted, GNU make
    can exit while a sub-make it started builds on, orphaned (the full suite's Ctrl-C test found one
    alive after its driver exited 130), and a sub-make forked just after a Ctrl-C missed its signal.
    A process that empties its own environment (env -i) escapes this; compilers and make do not."""
    for sig, wait_s in ((signal.SIGTERM, GRACE_S if grace_s is None else grace_s), (signal.SIGKILL, 5.0)):
        signalled: dict[int, int] = {}
        deadline = time.monotonic() + wait_s
        while True:
            now = marked(mark)
            if not now:
                return
            for pid, start in now.items():
                if signalled.get(pid) != start:     # a pid given to a new process is a new process
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                    signalled[pid] = start
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)


def _gone(p: subprocess.Popen, wait_s: float) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < wait_s:
        if p.poll() is not None and not group_members(p.pid):
            return True
        time.sleep(0.05)
    return False


def kill_group(p: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGTERM to the program's whole group, SIGKILL after grace_s to what is left; the program reaped."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        if _gone(p, wait_s):
            break
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_group(cmd: list[str], timeout_s: float, env: dict[str, str] | None = None, linger_s: float | None = None,
              stop: Callable[[], bool] = lambda: False) -> Ended:
    """Runs cmd in a session of its own, reading its output until it ends, `timeout_s` passes, or
    `stop()` (the scheduler's SIGTERM arrived); whatever of its group is left then is killed."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    linger_s = LINGER_S if linger_s is None else linger_s
    out = {p.stdout: bytearray(), p.stderr: bytearray()}
    deadline = time.monotonic() + timeout_s
    exited_at: float | None = None
    why = ""
    try:
        with selectors.DefaultSelector() as sel:
            for pipe in out:
                sel.register(pipe, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if exited_at is None and p.poll() is not None:
                    exited_at = now
                if not sel.get_map() and exited_at is not None:
                    break
                limit = deadline if exited_at is None else min(deadline, exited_at + linger_s)
                if now >= limit or (exited_at is None and _expired.is_set()):
                    why = "deadline" if exited_at is None else "lingering"
                    break
                if stop():
                    break
                if not sel.get_map():       # its output closed, the program not yet ended
                    time.sleep(0.05)
                    continue
                for key, _ in sel.select(timeout=min(0.2, limit - now)):
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        out[key.fileobj] += chunk
                    else:
                        sel.unregister(key.fileobj)
    finally:
        if p.poll() is None or group_members(p.pid):
            kill_group(p)          # on a deadline, a stop, an interrupt, or a child left behind
        for pipe in out:
            pipe.close()
    p.wait()
    return Ended(p.returncode, bytes(out[p.stdout]), bytes(out[p.stderr]), why)
