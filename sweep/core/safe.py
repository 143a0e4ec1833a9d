"""Where the tool may write, and what may reach make or a shell.

Three rules, checked before anything is written:

  * a path that make or a shell will read (the jobs folder, a target's folder) holds
    only characters neither can misread; anything else is refused, naming the character
  * the tool writes only into folders it made: jobs/<sweep>/ and results/<sweep>/
    each get a marker file (MARKER) first; an existing folder without one is the
    user's, and is refused unless it is empty (or a sweep from before the marker)
  * nothing is written through a link: files are opened with O_NOFOLLOW, and a
    sweep's own folders must not be links

The marker lists, one per line, what the tool wrote under its folder (paths relative
to it; sweep.core.atomic records them): `clean` deletes those and nothing else.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO, Any, Callable, Iterable

from sweep.core.errors import SweepError

MARKER = ".config-sweep"
MARKER_HEADER = "# written by config-sweep: this folder is a sweep's; the lines below are what it wrote here\n"
# Beyond letters and digits, what a path may hold to be written into a Makefile and a
# shell command line as it is: no space, quote, '$', '#', ':', '%', '=', ';', '\\' or glob.
PATH_EXTRA = frozenset("_./+,@~-")
JOB_FILE = "config.json"    # what every job folder holds (sweep.records.JobConfig)
MAX_RECORD_DEPTH = 4        # how far above a written file atomic looks for its folder's marker


def unsafe_char(text: str, extra: Iterable[str] = PATH_EXTRA) -> str | None:
    """The first character of `text` that is neither a letter, a digit nor in `extra`."""
    allowed = frozenset(extra)
    return next((c for c in text if not (c.isalnum() and c.isprintable()) and c not in allowed), None)


def check_make_path(path: Path | str, what: str) -> None:
    """Refuse a path that make or a shell would misread (the Makefiles name it unquoted)."""
    c = unsafe_char(str(path))
    if c is not None:
        why = ("contains whitespace, which make and the shell split into several paths" if c.isspace()
               else f"the character {c!r} cannot be passed to make and the shell safely")
        raise SweepError(f"{what} {str(path)!r}: {why}; use a folder whose path holds only letters, digits and "
                         "_ . / + , @ ~ -")


def usable_dir(path: Path, what: str) -> Path:
    """Create `path` (and its parents) as a writable folder, or refuse in one line naming it."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                raise SweepError(f"{what} {path}: {p} is a file, not a folder; give a folder path "
                                 f"({what} DIR)")
            break
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SweepError(f"{what} {path}: cannot create it ({e.strerror}); give a folder you can write to "
                         f"({what} DIR)") from None
    if not os.access(path, os.W_OK | os.X_OK):
        why = "the filesystem is read-only" if _read_only(path) else "you cannot write there"
        raise SweepError(f"{what} {path}: {why}; give a folder you can write to ({what} DIR)")
    return path


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def nested(a: Path, b: Path) -> bool:
    """Whether a and b are the same folder or one holds the other."""
    a, b = Path(a).resolve(), Path(b).resolve()
    return a == b or a in b.parents or b in a.parents


def has_marker(folder: Path) -> bool:
    m = Path(folder) / MARKER
    return m.is_file() and not m.is_symlink()


def check_claim(folder: Path, what: str, legacy: Callable[[Path], bool] = lambda d: False) -> bool:
    """Whether `folder` is the tool's already (True) or may be made so (False); refuses in one
    line otherwise. Writes nothing, so every folder of a run is checked before any is made."""
    folder = Path(folder)
    if folder.is_symlink():
        raise SweepError(f"{what} {folder} is a link; the tool never writes through links: give the real folder, "
                         "or choose another name")
    if folder.exists() and not folder.is_dir():
        raise SweepError(f"{what} {folder} is a file, not a folder; choose another name or move the file")
    if (folder / MARKER).is_symlink():
        raise SweepError(f"{what} {folder / MARKER} is a link; the tool never writes through links: remove it")
    if has_marker(folder):
        return True
    if folder.is_dir() and any(folder.iterdir()) and not legacy(folder):
        raise SweepError(f"{what} {folder} already holds files this tool did not write (no {MARKER} there); "
                         "choose another sweep name (--name) or folder, or empty it first")
    return False


def claim(folder: Path, what: str, legacy: Callable[[Path], bool] = lambda d: False) -> Path:
    """Make `folder` the tool's before anything is written in it: created with its marker
    first, or already marked, or empty, or (legacy) a sweep from before the marker.
    Anything else holds files the tool did not write, and is refused."""
    folder = Path(folder)
    if check_claim(folder, what, legacy):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    write_new(folder / MARKER, MARKER_HEADER.encode())
    forget(folder)
    return folder


_FLAGS = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}


def open_nofollow(path: Path | str, mode: str = "w") -> IO[Any]:
    """open(path, mode) for writing ("w", "a", "wb", "ab"), refusing a link at `path`: a log
    or lock that is a link would otherwise truncate or grow whatever it points at."""
    try:
        fd = os.open(path, _FLAGS[mode[0]] | os.O_NOFOLLOW, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SweepError(f"{path} is a link; the tool never writes through links: remove it") from None
        raise
    return os.fdopen(fd, mode)


def write_new(path: Path, data: bytes) -> None:
    """Create `path` afresh (never through a link) and write `data`."""
    with open_nofollow(path, "wb") as f:
        f.write(data)


_recorded: set[tuple[str, str, int, int]] = set()    # (marker, entry) appended by this process already


def owner(path: Path) -> Path | None:
    """The marked folder `path` lies in (None: none within MAX_RECORD_DEPTH), refusing a
    link anywhere from `path` up to that folder: inside a sweep's folders a link is never
    the tool's, and writing through it would touch what it points at."""
    path = Path(path)
    chain = [path]
    for up, folder in enumerate(path.parents):
        if up >= MAX_RECORD_DEPTH:
            return None
        chain.append(folder)
        if has_marker(folder):
            link = next((p for p in chain if p.is_symlink()), None)
            if link is not None:
                raise SweepError(f"{link} is a link inside the sweep folder {folder}; the tool never writes through "
                                 "links: remove it (the next run writes a real file)")
            return folder
    return None


def record(path: Path, folder: Path | None) -> None:
    """Note `path` in the marker of `folder` (its owner), so clean knows it is the tool's."""
    if folder is None:
        return
    rel = Path(path).relative_to(folder)
    # a job folder (it holds config.json) is the tool's as a whole: one line, not one per file
    entry = rel.parts[0] + "/" if len(rel.parts) > 1 and (Path(folder) / rel.parts[0] / JOB_FILE).is_file() \
        else rel.as_posix()
    st = os.stat(Path(folder) / MARKER, follow_symlinks=False)
    key = (str(folder), entry, st.st_dev, st.st_ino)     # a marker made afresh (after clean) lists anew
    if key in _recorded or "\n" in entry:
        return
    fd = os.open(Path(folder) / MARKER, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    with os.fdopen(fd, "a") as f:
        f.write(entry + "\n")
    _recorded.add(key)


def forget(folder: Path) -> None:
    """Drop what this process noted as recorded under `folder` (its marker was made anew)."""
    for key in [k for k in _recorded if k[0] == str(folder)]:
        _recorded.discard(key)


def recorded(folder: Path) -> list[str]:
    """What the tool wrote under `folder`, as its marker lists it (relative paths)."""
    try:
        fd = os.open(Path(folder) / MARKER, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return []
        raise
    with os.fdopen(fd, errors="replace") as f:
        lines = f.read().splitlines()
    return sorted({l for l in lines if l and not l.startswith("#")})


def inside(path: Path, folder: Path) -> bool:
    """Whether `path` (not resolved through its last part) lies under `folder`, no link on the way."""
    folder = Path(folder)
    try:
        rel = Path(path).relative_to(folder)
    except ValueError:
        return False
    if ".." in rel.parts or not rel.parts:
        return False
    p = folder
    for part in rel.parts:
        p = p / part
        if p.is_symlink():
            return False
    return True
