"""A content-addressed cache for nvcc objects, used as make's compiler wrapper:

    python3 objcache.py --dir CACHE -- nvcc <args> -c src.cu -o obj.o [-MMD -MP]

The key is the sha256 of: the preprocessed source (`nvcc -E` with the same
flags, which covers the host and every device pass, so a macro read only under
__CUDA_ARCH__ still counts), with line markers removed (they carry the job
folder's paths); the flags, minus paths that differ between job folders (-o,
-MF, -I, the source); and `nvcc --version`. So a conf.cuh that changes one
kernel family's macros changes that family's key only: the other objects are
copied from the cache instead of recompiled. Anything that is not a single
-c compile (a link) is passed straight to nvcc.

An entry is named for its key and for the sha256 of its own bytes, recorded when it is
stored (CACHE/ab/<key>-<content hash>.o): a hit is served only when the bytes still hash
to that name. A damaged entry (a truncated copy, a disk error, a hand edit) is evicted
and the object compiled afresh, with a line in the build log saying so, instead of
being served forever to every build that links it.

A hit also writes the dependency file make asked for (-MMD/-MF), from the
preprocessor's line markers, and replays what the compile printed (kept beside
the object: ptxas' --resource-usage lines, so a cached build reports its kernels'
registers and spills as a fresh one does). Entries are written atomically (a private temporary
file, fsynced, renamed into place), so builds on many nodes can share one cache
on a shared filesystem. Builders that miss the same object at once compile it once: the
first takes the entry's lock (an flock on CACHE/ab/<key>.lock, dropped by the kernel when its
holder dies) and compiles; the others wait for it and copy what it stored (or, when that
compile failed, each compiles the object itself, all at once). This matters
when a sweep's first jobs start together on a cold cache: each would otherwise compile the
whole program. Where the filesystem takes no locks, or the holder has not finished in
WAIT_FOR_OTHER_S, a builder compiles without it (the atomic writes keep the entry whole).
Each call logs one line to stderr:
    objcache: hit build/obj/residual.o
    objcache: hit build/obj/matvec.o (after 21.4 s waiting for another build compiling it)
    objcache: miss build/obj/matmul.o (compiled in 7.9 s)
    objcache: damaged entry CACHE/ab/<key>-<hash>.o (its bytes no longer match the hash recorded
              when it was stored): evicted; compiling build/obj/matmul.o afresh
Stdlib only: it runs on GPU nodes with nothing but python3.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

MARKER = re.compile(rb'^#(?:line)?\s*\d+\s+"([^"]*)"[^\n]*$', re.M)
_version_cache: dict[str, bytes] = {}
# How long a builder waits for another one compiling the same object before compiling it
# itself: longer than any one translation unit takes (the engine's slowest, kernel_check,
# takes about 3 minutes of a loaded core), short of a job's time limit.
WAIT_FOR_OTHER_S = 1200.0


def _split(args: list[str]) -> tuple[str | None, str | None, str | None, list[str]]:
    """(output, source, depfile, flags that identify the compile) from an nvcc command line."""
    out = dep = src = None
    ident: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "-MF", "-MT", "-MQ"):
            if a == "-o":
                out = args[i + 1]
            elif a == "-MF":
                dep = args[i + 1]
            i += 2
            continue
        if a in ("-I", "-isystem", "-include"):
            i += 2
            continue
        if a.startswith("-I") or a in ("-MMD", "-MD", "-MP", "-c"):
            i += 1
            continue
        if not a.startswith("-") and a.endswith((".cu", ".cpp", ".cc", ".c")):
            src = a
            i += 1
            continue
        ident.append(a)
        i += 1
    return out, src, dep, ident


def _nvcc_version(nvcc: str) -> bytes:
    if nvcc not in _version_cache:
        _version_cache[nvcc] = subprocess.run([nvcc, "--version"], capture_output=True).stdout
    return _version_cache[nvcc]


def _preprocess(cmd: list[str], out: str) -> bytes:
    pp = [a for a in cmd if a not in ("-c", "-MMD", "-MD", "-MP")]
    drop = {"-o", "-MF", "-MT", "-MQ"}
    cleaned, skip = [], False
    for a in pp:
        if skip:
            skip = False
            continue
        if a in drop:
            skip = True
            continue
        cleaned.append(a)
    r = subprocess.run(cleaned + ["-E"], capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode(errors="replace"))
    return r.stdout


def _depfile(obj: str, text: bytes) -> str:
    seen: dict[str, None] = {}
    for m in MARKER.finditer(text):
        p = m.group(1).decode(errors="replace")
        if p and not p.startswith("<") and os.path.isfile(p):
            seen[os.path.normpath(p)] = None
    deps = list(seen)
    body = f"{obj}: " + " \\\n  ".join(deps) + "\n"
    return body + "".join(f"\n{d}:\n" for d in deps[1:])  # -MP: phony targets for headers


def _store(src: Path, dst: Path) -> None:
    """Copy src to dst through a temporary file of this process beside dst, flushed to disk,
    then renamed over dst: readers on any node see the old file or the whole new one, and
    writers of the same entry (identical bytes) never mix their writes; the last rename wins."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=".tmp-")
    try:
        with open(src, "rb") as f, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(f, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())   # the data is on disk before the name points at it
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="objcache.py")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--job-flags", type=Path, help="a JSON list of words put first on the command (CMake's launcher: "
                    "the configuration's -I and -D; sweep/node/cmake.py writes it); ignored when absent")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("missing the compiler command after --")
    if a.job_flags is not None and a.job_flags.is_file() and "-c" in cmd:
        words = json.loads(a.job_flags.read_text())
        cmd = [cmd[0], *(str(w) for w in words), *cmd[1:]]   # first: the job's conf.cuh before the project's headers
    out, src, dep, ident = _split(cmd[1:])
    if "-c" not in cmd or not out or not src:
        return subprocess.run(cmd).returncode          # a link, or something we do not cache
    if dep is None and ("-MMD" in cmd or "-MD" in cmd):
        dep = str(Path(out).with_suffix(".d"))         # where nvcc puts it without -MF
    try:
        text = _preprocess(cmd, out)
    except (RuntimeError, OSError):
        return subprocess.run(cmd).returncode          # let the real compile report the error
    h = hashlib.sha256()
    h.update(MARKER.sub(b"", text))
    h.update("\0".join([os.path.basename(cmd[0])] + ident).encode())
    h.update(_nvcc_version(cmd[0]))
    key = h.hexdigest()
    data = _verified_entry(a.dir / key[:2], key, out)
    if data is not None:
        return _serve(a.dir, key, data, out, dep, text, waited_s=0.0)
    failures_before = _failures(a.dir, key)
    with _compile_lock(a.dir, key) as waited_s:
        data = _verified_entry(a.dir / key[:2], key, out)
        if data is not None:    # another build stored it since the look above, or while this one waited
            return _serve(a.dir, key, data, out, dep, text, waited_s)
        if _failures(a.dir, key) == failures_before:
            return _compile(cmd, a.dir, key, out)
    # The compile this one waited for failed. Compile it here too (a failure may be the other
    # node's own: memory, disk), but after letting go of the lock: every builder waiting on a
    # failing object then compiles at once, not one after another, each waiting out the last.
    return _compile(cmd, a.dir, key, out)


def _serve(cache: Path, key: str, data: bytes, out: str, dep: str | None, text: bytes, waited_s: float) -> int:
    """A hit: the entry's bytes as `out`, the dependency file make asked for, and what the
    compile printed."""
    _store_bytes(data, Path(out))
    if dep:
        Path(dep).write_text(_depfile(out, text))
    said = _messages(cache, key)
    if said.is_file():      # what the compile printed (ptxas' registers and spills), as if compiled again
        sys.stderr.write(said.read_text(errors="replace"))
    waited = f" (after {waited_s:.1f} s waiting for another build compiling it)" if waited_s >= 0.05 else ""
    print(f"objcache: hit {out}{waited}", file=sys.stderr)
    return 0


@contextlib.contextmanager
def _compile_lock(cache: Path, key: str) -> Iterator[float]:
    """Hold the entry's compile lock while the body runs; yields the seconds spent waiting for
    another holder (0.0: none was compiling it). Without the lock (a filesystem that takes none,
    or a holder past WAIT_FOR_OTHER_S) it yields all the same: the body then compiles alongside."""
    t0 = time.monotonic()
    try:
        (cache / key[:2]).mkdir(parents=True, exist_ok=True)
        fd = os.open(cache / key[:2] / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        fd = None       # a cache folder this builder cannot write a lock into: compile unlocked
    if fd is None:
        yield 0.0
        return
    pause = 0.05        # growing to 1 s: an array's waiters on a shared filesystem ask its server rarely
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - t0 > WAIT_FOR_OTHER_S:
                    print(f"objcache: gave up waiting after {WAIT_FOR_OTHER_S:.0f} s for another build compiling "
                          f"the entry {key[:16]}; compiling it here too", file=sys.stderr)
                    break
                time.sleep(pause)
                pause = min(1.0, pause * 1.5)
            except OSError:
                break       # no locks on this filesystem: compile, as every builder then does
        yield time.monotonic() - t0
    finally:
        os.close(fd)        # drops the lock


def _compile(cmd: list[str], cache: Path, key: str, out: str) -> int:
    """A miss: compile, then store the object and what the compile printed under `key`."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    rc = p.returncode
    if rc == 0 and Path(out).is_file():
        entry = cache / key[:2] / f"{key}-{_content_hash(Path(out).read_bytes())}.o"
        messages = Path(out).with_suffix(".objcache-log")
        try:
            messages.write_text(p.stdout + p.stderr)
            _store(messages, _messages(cache, key))   # before the object: a hit finds both
        finally:
            messages.unlink(missing_ok=True)
        _store(Path(out), entry)
        print(f"objcache: miss {out} (compiled in {time.monotonic() - t0:.1f} s)", file=sys.stderr)
    else:
        _store_bytes(os.urandom(8).hex().encode(), _failure_mark(cache, key))   # what waiters compare
    return rc


def _failure_mark(cache: Path, key: str) -> Path:
    """A token rewritten by each failed compile of `key`: a builder that waited for the entry's
    lock tells by it whether the compile it waited for failed (no clocks compared across nodes)."""
    return cache / key[:2] / f"{key}.failed"


def _failures(cache: Path, key: str) -> bytes | None:
    try:
        return _failure_mark(cache, key).read_bytes()
    except OSError:
        return None


def _messages(cache: Path, key: str) -> Path:
    """Where what an entry's compile printed is kept (ptxas' resource lines), beside its object."""
    return cache / key[:2] / f"{key}.log"


def _content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _verified_entry(shard: Path, key: str, out: str) -> bytes | None:
    """The bytes of an entry for `key` that still hash to the name they were stored under;
    entries that do not are evicted, each with a note in the build log. None: a miss."""
    try:
        entries = sorted(shard.glob(f"{key}-*.o"))
    except OSError:
        return None
    for entry in entries:
        try:
            data = entry.read_bytes()
        except OSError:
            continue        # gone meanwhile (another builder evicted it)
        if data and _content_hash(data) == entry.name[len(key) + 1:-2]:
            return data
        print(f"objcache: damaged entry {entry} (its bytes no longer match the hash recorded when it was stored): "
              f"evicted; compiling {out} afresh", file=sys.stderr)
        try:
            entry.unlink()
        except OSError:
            pass            # evicted by another builder, or not ours to remove: a miss either way
    return None


def _store_bytes(data: bytes, dst: Path) -> None:
    """`data` into dst, atomically (as _store)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
