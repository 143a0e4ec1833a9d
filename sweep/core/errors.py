"""The one error type users see.

A SweepError is a mistake the user can fix (a bad space file, a missing tool, a
sweep that does not exist). Its message names the file or value, what is
allowed and what to do; the CLI prints it on one line and exits 1. Anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations

import os


class SweepError(Exception):
    """A user-facing error whose message says what is wrong and how to fix it."""


NO_SPACE = "No space left on device"


class DiskFull(SweepError):
    """The filesystem under the sweep is full: the run ends (nothing half-written is kept
    as a result), naming the filesystem and what it needs."""

    @classmethod
    def at(cls, path: "str | os.PathLike[str]", needs_bytes: int = 0) -> "DiskFull":
        import shutil
        from pathlib import Path

        p = Path(path)
        while not p.exists() and p != p.parent:
            p = p.parent
        usage = shutil.disk_usage(p)
        need = f"; a configuration here needs about {needs_bytes / 2**20:.1f} MiB" if needs_bytes else ""
        return cls(f"the filesystem holding {path} ({_mount_point(p)}) is full: {usage.free / 2**20:.1f} MiB free of "
                   f"{usage.total / 2**20:.1f} MiB{need}. Free space there or pass --jobs-dir on another filesystem, "
                   "then run the same command again: nothing was recorded for the configuration that hit it")


def _mount_point(path: "os.PathLike[str]") -> str:
    import os

    p = os.path.realpath(path)
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    return p
