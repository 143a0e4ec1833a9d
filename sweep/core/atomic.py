"""Atomic file writes: a reader (or a crash) sees the old file or the new one,
never half of either. Everything a sweep measures is written through here.

Nothing is written through a link: the temporary file is created exclusively and
renamed over the name (a link there is replaced, never followed), and inside a
sweep's folders a link on the way is refused (sweep.core.safe.owner). What is
written there is listed in the folder's marker, so `clean` deletes only that.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from sweep.core import safe

# mkstemp creates files readable by the owner only; results should follow the
# umask like any other file (a group may share a sweep on a cluster).
_UMASK = os.umask(0)
os.umask(_UMASK)


def write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """Write `data` to `path` via a temporary file in the same folder, fsynced, then renamed.
    durable=False skips the fsync, for files the tool writes again whenever it finds them
    different (a job's rendered conf.cuh and Makefile): still never seen half-written, and a
    rendering of thousands of jobs does not wait on the disk for each file."""
    path = Path(path)
    folder = safe.owner(path)          # before anything is created: a link on the way is refused
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    safe.record(path, folder)


def write_text(path: Path, text: str, durable: bool = True) -> None:
    write_bytes(path, text.encode(), durable)


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")
