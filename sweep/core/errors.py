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
    def at(cls, path: "str | os.PathLike[str]", needs_bytes: int = 0, flag: str = "--jobs-dir") -> "DiskFull":
        """The message for the filesystem holding `path`; `flag` moves that folder elsewhere."""
        import shutil
        from pathlib import Path

        p = Path(path)
        while not p.exists() and p != p.parent:
            p = p.parent
        usage = shutil.disk_usage(p)
        need = f"; a configuration here needs about {size(needs_bytes)}" if needs_bytes else ""
        return cls(f"the filesystem holding {path} ({_mount_point(p)}) is full: {size(usage.free)} free of "
                   f"{size(usage.total)}{need}. Free space there or pass {flag} on another filesystem, "
                   "then run the same command again: nothing was recorded for the configuration that hit it")

    @classmethod
    def fullest(cls, folders: "dict[str, str | os.PathLike[str]]") -> "DiskFull":
        """A write that named no file (a flush, a library's own writer): the message for the folder,
        of `folders` (flag -> folder), whose filesystem has the least room left."""
        import shutil
        from pathlib import Path

        def free(path: "str | os.PathLike[str]") -> int:
            p = Path(path)
            while not p.exists() and p != p.parent:
                p = p.parent
            return shutil.disk_usage(p).free

        flag = min(folders, key=lambda f: free(folders[f]))
        return cls.at(folders[flag], flag=flag)


def size(n: float) -> str:
    """Bytes in MiB, or in KiB under 1 MiB (0.98 MB read "0.0 MiB")."""
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 2**10:,.1f} KiB"


def _mount_point(path: "os.PathLike[str]") -> str:
    import os

    p = os.path.realpath(path)
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    return p
