"""One driver per sweep: a lock file in the sweep folder naming host, pid and start.

The lock is an flock on jobs/<sweep>/_driver.lock, held for the whole run, plus
the holder's facts written into the file. The kernel drops an flock when its
process dies (kill -9 included), so a dead driver on this host never blocks the
next one; its facts are then taken over with a note. A holder on another host
(a shared filesystem, where flock may not reach across nodes) refreshes a
heartbeat in the file; one whose heartbeat is older than STALE_S is taken over.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sweep.core.errors import SweepError
from sweep.records import now
from sweep.core.paths import COMMAND

LOCK = "_driver.lock"
HEARTBEAT_S = 30.0
STALE_S = 600.0


def pid_alive(pid: object) -> bool:
    """Whether a process of this pid runs on this host."""
    try:
        os.kill(int(pid), 0)  # type: ignore[arg-type]
        return True
    except (OSError, ValueError, TypeError):
        return False


def holder(sweep_dir: Path) -> dict[str, Any] | None:
    """The facts of the driver holding the sweep, with "alive": True/False/None (None:
    on another host, judged by its heartbeat); None when no driver ever held it."""
    path = Path(sweep_dir) / LOCK
    try:
        info = json.loads(_read(path) or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    if info.get("host") == socket.gethostname() and not pid_alive(info.get("pid")):
        info["alive"] = False     # killed (kill -9): whatever it left holding the file, the driver is gone
    elif info.get("host") == socket.gethostname():
        try:
            with _open(path) as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
            info["alive"] = False
        except BlockingIOError:
            info["alive"] = True
    else:
        info["alive"] = time.time() - float(info.get("heartbeat", 0)) < STALE_S
    return info


def _open(path: Path):
    """The lock file, created if missing, never through a link (whose target it would truncate)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SweepError(f"{path} is a link; the tool never writes through links: remove it") from None
        raise
    return os.fdopen(fd, "a+")


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as f:
        return f.read()


class DriverLock:
    def __init__(self, sweep_dir: Path, sweep: str):
        self.path = Path(sweep_dir) / LOCK
        self.sweep = sweep
        self._f = None
        self._stop = threading.Event()
        self._mutex = threading.Lock()      # the heartbeat never writes into a closed file
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "DriverLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = _open(self.path)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise SweepError(self._busy(self._read())) from None
        old = self._read()
        if old and old.get("host") != socket.gethostname() and time.time() - float(old.get("heartbeat", 0)) < STALE_S:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()
            raise SweepError(self._busy(old))
        if old:
            print(f"note: took over the lock of sweep {self.sweep} from a driver that is gone (host {old.get('host')}, "
                  f"pid {old.get('pid')}, started {old.get('started')})", file=sys.stderr)
        self._f = f
        self._info = {"host": socket.gethostname(), "pid": os.getpid(), "started": now(), "heartbeat": time.time()}
        self._write()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with self._mutex:
            if self._f is not None:
                self._f.seek(0)
                self._f.truncate()
                self._f.flush()
                fcntl.flock(self._f, fcntl.LOCK_UN)
                self._f.close()
                self._f = None

    def _busy(self, info: dict[str, Any] | None) -> str:
        who = (f"host {info.get('host')}, pid {info.get('pid')}, since {info.get('started')}" if info
               else "another process")
        return (f"sweep {self.sweep} is being run by another driver ({who}); wait for it to finish, watch it with "
                f"`{COMMAND} status {self.sweep}`, or stop that driver first")

    def _read(self) -> dict[str, Any] | None:
        try:
            info = json.loads(_read(self.path) or "null")
        except (OSError, ValueError):
            return None
        return info if isinstance(info, dict) else None

    def _write(self) -> None:
        assert self._f is not None
        self._f.seek(0)
        self._f.truncate()
        self._f.write(json.dumps(self._info))
        self._f.flush()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self._mutex:
                if self._f is None:
                    return
                self._info["heartbeat"] = time.time()
                try:
                    self._write()
                except (OSError, ValueError):
                    return
