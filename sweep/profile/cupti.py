"""CUPTI backend: an injection library that records every kernel launch, and the
parser for the file it writes. No profiler process, no export step.

    lib = library(cache_dir)                      # built with nvcc once, then cached
    env = {**os.environ, **environment(lib, out)}
    subprocess.run(program, env=env)              # the program runs as usual
    capture = parse(out)                          # Measurements, resources, clean or crashed

The library (cupti_inject.cpp, next to this file; its header comment documents
the "sweep-cupti/1" file format) is loaded by the CUDA driver through
CUDA_INJECTION64_PATH. It records, through the CUPTI Activity API, every kernel
execution (name, grid, block, shared memory, registers, GPU start and end), the
launch calls (CPU start and thread, for placing launches in iterations) and
NVTX range starts and ends, and writes them as CUPTI completes each buffer, so
a program that crashes leaves what was flushed; a clean exit ends the file with
an `end` line.

Attribution to timed iterations follows the nsys backend (sweep/profile/ranges.py):
with NVTX ranges named "iteration", a launch counts in the range its launch call
started in, on the same thread, and launches outside them (warm-up, checks) are
left out; without such ranges, every launch counts in one single iteration.
NVTX ranges are seen only when the program opens them after initialising CUDA.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from sweep import atomic
from sweep.errors import SweepError
from sweep.profile import Launch, Measurement, aggregate
from sweep.profile.cupti_file import KernelRecord, read_capture
from sweep.profile.ranges import attribute

SOURCE = Path(__file__).with_name("cupti_inject.cpp")
ENV_OUT = "SWEEP_CUPTI_OUT"    # where the library writes; "%p" in it becomes the process id
BUILD_FLAGS = ("-shared", "-std=c++17", "-O2", "-Xcompiler", "-fPIC,-fvisibility=hidden")
RERUN = "re-run the program and check its log"


# ---------------------------------------------------------------------------
# Building the library
# ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Toolkit:
    """Where nvcc and CUPTI are; found by `find_toolkit`."""

    nvcc: tuple[str, ...]
    version_text: str           # `nvcc --version`, whole
    cuda_version: str           # e.g. "13.0.88"
    include_dir: Path           # holds cupti.h
    lib_dir: Path               # holds libcupti.so*
    libcupti: Path              # the library to link and to name in NVTX_INJECTION64_PATH


def find_toolkit(nvcc: str = "nvcc", cupti_home: Path | None = None) -> Toolkit:
    """nvcc's version and the CUPTI headers and library of its toolkit (or under `cupti_home`)."""
    cmd = shlex.split(nvcc)
    if not cmd or shutil.which(cmd[0]) is None:
        raise SweepError(f"nvcc {nvcc!r} was not found on PATH; the CUPTI backend builds its injection library with "
                         f"nvcc: load CUDA (e.g. 'module load cuda') or pass nvcc='/path/to/cuda/bin/nvcc'")
    version = _run(cmd + ["--version"], "nvcc --version")
    m = re.search(r"release [\d.]+, V([\d.]+)", version)
    cuda_version = m.group(1) if m else "unknown"
    roots = [Path(cupti_home)] if cupti_home else []
    dry = subprocess.run(cmd + ["--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                         capture_output=True, text=True)
    notes = dry.stdout + dry.stderr
    tops = [Path(t.strip()) for t in re.findall(r"^#\$ TOP=(.*)$", notes, re.M)]
    dirs = {"include": [root / "include" for root in roots],
            "lib": [root / d for root in roots for d in ("lib64", "lib")]}
    dirs["include"] += [Path(p) for p in re.findall(r'-I"?([^"\s]+)', _line(notes, "INCLUDES"))]
    dirs["lib"] += [Path(p) for p in re.findall(r'-L"?([^"\s]+)', _line(notes, "LIBRARIES")) if "stubs" not in p]
    for top in tops:
        dirs["include"] += [top / "include", top / "extras" / "CUPTI" / "include"]
        dirs["lib"] += [top / "lib64", top / "lib", top / "extras" / "CUPTI" / "lib64"]
    include = next((d.resolve() for d in dirs["include"] if (d / "cupti.h").is_file()), None)
    libcupti = next((f for d in dirs["lib"] for f in _libcupti(d.resolve())), None)
    if include is None or libcupti is None:
        missing = "cupti.h" if include is None else "libcupti.so"
        searched = dirs["include"] if include is None else dirs["lib"]
        package = "cuda-cupti-dev-" + "-".join(cuda_version.split(".")[:2]) if m else "cuda-cupti-dev-<version>"
        raise SweepError(
            f"{missing} was not found for {cmd[0]} (CUDA {cuda_version}); looked in "
            f"{', '.join(str(d) for d in dict.fromkeys(searched)) or 'nothing (nvcc --dryrun named no folders)'}. "
            f"Install the toolkit's CUPTI component (e.g. apt install {package}, or the CUDA runfile with CUPTI), "
            f"or pass cupti_home=<folder holding include/cupti.h and lib64/libcupti.so>")
    return Toolkit(tuple(cmd), version, cuda_version, include, libcupti.parent, libcupti)


def library(cache_dir: Path, nvcc: str = "nvcc", *, cupti_home: Path | None = None) -> Path:
    """The injection library, built with `nvcc` the first time and cached in `cache_dir`.

    The cache key is the CUDA version (`nvcc --version`), the host architecture,
    the CUPTI folders, the build flags and cupti_inject.cpp's sha256: a changed
    source or toolkit builds a new library. Builds go to a temporary file that
    is renamed into place, under a lock where the file system has one, so
    processes building at once all end with a whole library. Next to it,
    `<name>.json` records where CUPTI is, for `environment`.
    """
    cache_dir = Path(cache_dir)
    tk = find_toolkit(nvcc, cupti_home)
    source = SOURCE.read_bytes()
    key = hashlib.sha256("\0".join([
        tk.version_text, platform.machine(), str(tk.include_dir), str(tk.libcupti), " ".join(BUILD_FLAGS),
        hashlib.sha256(source).hexdigest()]).encode()).hexdigest()
    lib = cache_dir / f"libsweep_cupti-cuda{tk.cuda_version}-{platform.machine()}-{key[:16]}.so"
    if lib.is_file():
        return lib
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _lock(cache_dir / f".{lib.name}.lock"):
        if lib.is_file():  # another process built it while we waited
            return lib
        fd, tmp = tempfile.mkstemp(prefix=f".{lib.stem}.", suffix=".so", dir=cache_dir)
        os.close(fd)
        try:
            link = (["-lcupti"] if tk.libcupti.name == "libcupti.so" else [f"-l:{tk.libcupti.name}"])
            cmd = [*tk.nvcc, *BUILD_FLAGS, f"-I{tk.include_dir}", f"-L{tk.lib_dir}", "-Xlinker",
                   f"-rpath={tk.lib_dir}", str(SOURCE), *link, "-o", tmp]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise SweepError(f"building the CUPTI injection library failed (exit {r.returncode}):\n  "
                                 f"{shlex.join(cmd)}\n{(r.stdout + r.stderr).strip()[-2000:]}")
            os.chmod(tmp, 0o755)
            # The facts first, then the library: whoever sees the library sees its facts.
            atomic.write_json(_facts_path(lib), {
                "cuda_version": tk.cuda_version, "cupti_lib_dir": str(tk.lib_dir), "libcupti": str(tk.libcupti),
                "cupti_include_dir": str(tk.include_dir), "source_sha256": hashlib.sha256(source).hexdigest(),
                "command": shlex.join(cmd[:-1] + [str(lib)])})
            os.replace(tmp, lib)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return lib


def environment(lib: Path, out: Path, *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables to run a program under the library, writing its capture to `out`.

    CUDA_INJECTION64_PATH loads the library; NVTX_INJECTION64_PATH routes NVTX
    ranges to CUPTI; SWEEP_CUPTI_OUT names the capture file; LD_LIBRARY_PATH gets
    the CUPTI folder in front of `base`'s (default: this process's environment).
    Merge the result over the environment the program would otherwise get.
    """
    lib = Path(lib).resolve()
    facts_path = _facts_path(lib)
    try:
        facts = json.loads(facts_path.read_text())
        lib_dir, libcupti = facts["cupti_lib_dir"], facts["libcupti"]
    except (OSError, ValueError, KeyError):
        raise SweepError(f"{facts_path} is missing or unreadable, so where CUPTI lives is unknown; "
                         f"get the library from sweep.profile.cupti.library(), which writes it") from None
    base = os.environ if base is None else base
    path = [lib_dir, *[p for p in base.get("LD_LIBRARY_PATH", "").split(":") if p and p != lib_dir]]
    return {"CUDA_INJECTION64_PATH": str(lib), "NVTX_INJECTION64_PATH": libcupti, ENV_OUT: str(Path(out).absolute()),
            "LD_LIBRARY_PATH": ":".join(path)}


def _facts_path(lib: Path) -> Path:
    return lib.with_suffix(".json")


def _libcupti(folder: Path) -> list[Path]:
    """libcupti.so (the link name) if there, else the versioned runtime library."""
    if (folder / "libcupti.so").is_file():
        return [folder / "libcupti.so"]
    return sorted(folder.glob("libcupti.so.*"))[:1]


def _line(notes: str, name: str) -> str:
    m = re.search(rf"^#\$ {name}=(.*)$", notes, re.M)
    return m.group(1) if m else ""


def _run(cmd: list[str], what: str) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SweepError(f"{what} failed (exit {r.returncode}): {(r.stdout + r.stderr).strip()[-500:]}")
    return r.stdout


class _lock:
    """An exclusive flock on `path`; where the file system refuses locks, none
    (the temporary-file-and-rename build is safe without one, only wasteful)."""

    def __init__(self, path: Path):
        self._path = path
        self._fd: int | None = None

    def __enter__(self) -> "_lock":
        try:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError:
            if self._fd is not None:
                os.close(self._fd)
            self._fd = None
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)


# ---------------------------------------------------------------------------
# Parsing a capture
# ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class KernelResources:
    """What one kernel used at one launch shape, as CUPTI reported it (per launch)."""

    kernel: str
    kernel_full: str            # demangled, with template arguments and parameters
    mangled: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int
    static_shared_bytes: int
    dynamic_shared_bytes: int
    local_bytes_per_thread: int
    launches: int               # launches with these resources, counted or not (warm-up, checks)

    @property
    def shared_bytes(self) -> int:
        return self.static_shared_bytes + self.dynamic_shared_bytes


@dataclass(frozen=True, slots=True)
class ParsedCapture:
    """A capture file read: the Measurements and what else the file says."""

    measurements: tuple[Measurement, ...]
    resources: tuple[KernelResources, ...]
    complete: bool              # an `end` line: the program exited and the final flush ran
    signal: int | None          # the fatal signal the library saw, if one arrived
    iterations: int             # timed iterations (1 when the program has no NVTX iteration ranges)
    launches: int               # kernel executions in the file
    counted: int                # of those, in the Measurements (inside timed iterations)
    unfinished: int             # kernel records without timestamps (still queued at a crash)
    partial_iterations: int     # iteration ranges left out because a launch in them never finished
    unclosed_ranges: int        # iteration ranges opened and never closed (a crash inside one)
    dropped: int                # records CUPTI dropped (its buffers were full)
    pid: int | None

    @property
    def truncated(self) -> bool:
        return not self.complete

    def resources_of(self, m: Measurement) -> tuple[KernelResources, ...]:
        """The resource rows of a Measurement's kernel and launch shape."""
        return tuple(r for r in self.resources if (r.kernel, r.grid, r.block) == (m.kernel, m.grid, m.block))

    def summary(self) -> str:
        """One line for a job log, e.g. 'complete: 60 of 74 launches in 20 timed iterations'."""
        how = "complete" if self.complete else (f"TRUNCATED by signal {self.signal}" if self.signal
                                                else "TRUNCATED (no end line: the program was killed or crashed)")
        extra = [f"{n} {what}" for n, what in ((self.unfinished, "unfinished launches"),
                 (self.partial_iterations, "iterations left out as unfinished"),
                 (self.unclosed_ranges, "unclosed iteration ranges"), (self.dropped, "dropped records")) if n]
        return (f"{how}: {self.counted} of {self.launches} launches in {self.iterations} timed iteration"
                f"{'s' if self.iterations != 1 else ''}" + (f" ({', '.join(extra)})" if extra else ""))


def parse(path: Path, iteration_range: str = "iteration") -> ParsedCapture:
    """Measurements per kernel x launch shape, and the capture's facts, from a sweep-cupti/1 file.

    A truncated file (no `end` line, or a torn last line) still parses: what was
    flushed counts, and `complete` is False. Raises SweepError when nothing
    usable is there.
    """
    path = Path(path)
    cap = read_capture(path)
    kernels = cap.kernels
    finished = [k.end > k.start > 0 for k in kernels]
    if not any(finished):
        why = ("the program ran no kernels" if cap.complete else
               "the program stopped before CUPTI flushed any kernel record")
        raise SweepError(f"{path} holds no finished kernel launches: {why}; {RERUN}")
    ranges, unclosed = cap.ranges(iteration_range)
    partial = 0
    if not ranges:
        if unclosed:
            raise SweepError(f"{path}: none of the {unclosed} NVTX {iteration_range!r} ranges was closed, so the "
                             f"program stopped inside its first timed iteration; {RERUN}")
        launches = [_launch(k, 0) for k, done in zip(kernels, finished) if done]
        iterations = 1
    else:
        calls = [cap.calls.get(k.correlation) for k in kernels]
        where, _ = attribute([(c.start, c.tid) if c else (None, None) for c in calls], ranges)
        # An iteration with a launch that never finished (still queued at a crash) is left
        # out whole: its other launches alone would fake a short iteration.
        cut = {i for i, done in zip(where, finished) if i is not None and not done}
        kept = {i: n for n, i in enumerate(sorted({i for i in where if i is not None} - cut))}
        launches = [_launch(k, kept[i]) for k, i in zip(kernels, where) if i in kept]
        iterations, partial = len(kept), len(cut)
        if not launches:
            hint = ("no launch calls were traced (no `call` lines), so launches cannot be placed in ranges"
                    if not cap.calls else
                    "open the ranges on the thread that launches the kernels, around the launches")
            raise SweepError(f"{path}: none of the {len(kernels)} kernel launches was issued and finished inside one "
                             f"of the {len(ranges)} NVTX {iteration_range!r} ranges; {hint}")
    return ParsedCapture(
        measurements=tuple(aggregate(launches, iterations)), resources=_resources(kernels),
        complete=cap.complete, signal=cap.signal, iterations=iterations, launches=len(kernels),
        counted=len(launches), unfinished=finished.count(False), partial_iterations=partial,
        unclosed_ranges=unclosed, dropped=cap.dropped, pid=cap.pid)


def _launch(k: KernelRecord, iteration: int) -> Launch:
    return Launch(kernel=k.kernel, grid=k.grid, block=k.block, duration_ns=float(k.end - k.start),
                  iteration=iteration, kernel_full=k.kernel_full)


def _resources(kernels: list[KernelRecord]) -> tuple[KernelResources, ...]:
    counts: dict[tuple, int] = {}
    for k in kernels:
        key = (k.kernel, k.grid, k.block, k.kernel_full, k.mangled, k.registers, k.static_shared, k.dynamic_shared,
               k.local_per_thread)
        counts[key] = counts.get(key, 0) + 1
    return tuple(KernelResources(kernel, full, mangled, grid, block, regs, static, dynamic, local, n)
                 for (kernel, grid, block, full, mangled, regs, static, dynamic, local), n in sorted(counts.items()))
