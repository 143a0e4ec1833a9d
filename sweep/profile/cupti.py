"""CUPTI backend: an injection library that records every kernel launch, and the
parser for the file it writes. No profiler process, no capture range, no export step.

    lib = library(cache_dir)                      # built with nvcc once, then cached
    env = {**os.environ, **environment(lib, out)}
    subprocess.run(program, env=env)              # the program runs as usual
    capture = parse(out)                          # Measurements, resources, clean or crashed

The library (cupti_inject.cpp, next to this file and shipped as package data;
its header comment documents the "sweep-cupti/2" file format) is loaded by the
CUDA driver through CUDA_INJECTION64_PATH. It records, through the CUPTI
Activity API, every kernel execution (name, grid, block, shared memory,
registers, GPU start and end), the launch calls (CPU start and thread, for
placing launches in iterations), NVTX range starts and ends, and launches the
runtime refused (their size and error), and writes them as CUPTI completes each
buffer, so a program that crashes leaves what was flushed; a clean exit ends
the file with an `end` line.

As a sweep backend (BACKEND): `setup` builds the library in the job's cache
directory (config.json's settings.cache_dir, <jobs>/_cache/cupti), once per CUDA
version, host architecture and source (the build stage already does it, off the
GPU); the profiled run is the program itself with the library's environment,
capturing the whole run. Launches are attributed to NVTX "iteration" ranges as
the nsys backend does (cupti_parse.py); a program without such ranges is one
iteration per run: every launch counts, checks and warm-up included. The library
also records CUPTI's clock next to the wall clock, so each timed iteration's
window on the wall clock comes with the parse (Parsed.windows), for the sampler
to drop iterations the GPU ran throttled.
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

from sweep.core import atomic
from sweep.core.errors import SweepError
from sweep.profile.base import WHOLE_RUN, Backend, Invocation, Parsed, Request, forward_from_stdout
from sweep.profile.cupti_file import read_capture
from sweep.profile.cupti_parse import KernelResources, ParsedCapture, parse  # noqa: F401  (the parser's API, here too)
from sweep.profile.overlap import note

SOURCE = Path(__file__).with_name("cupti_inject.cpp")
HEADERS = (Path(__file__).with_name("cupti_token.h"),)   # included by SOURCE: part of the cache key
ENV_TOKEN = "SWEEP_GPU_TOKEN"  # overlap mode: the GPU's node-wide lock file, taken around the program's GPU work
ENV_OUT = "SWEEP_CUPTI_OUT"    # where the library writes; "%p" in it becomes the process id
BUILD_FLAGS = ("-shared", "-std=c++17", "-O2", "-Xcompiler", "-fPIC,-fvisibility=hidden")


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
    source = SOURCE.read_bytes() + b"".join(h.read_bytes() for h in HEADERS)
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
            cmd = [*tk.nvcc, *BUILD_FLAGS, f"-I{tk.include_dir}", f"-I{HEADERS[0].parent}", f"-L{tk.lib_dir}", "-Xlinker",
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


def environment(lib: Path, out: Path | None, *, base: Mapping[str, str] | None = None,
                token: Path | str | None = None) -> dict[str, str]:
    """The variables to run a program under the library, writing its capture to `out`.

    CUDA_INJECTION64_PATH loads the library; NVTX_INJECTION64_PATH routes NVTX
    ranges to CUPTI; SWEEP_CUPTI_OUT names the capture file; LD_LIBRARY_PATH gets
    the CUPTI folder in front of `base`'s (default: this process's environment).
    Merge the result over the environment the program would otherwise get.
    `token`: overlap mode, SWEEP_GPU_TOKEN names the GPU's lock file (the library takes it
    around the program's GPU work); `out` None with a token: token-only mode, nothing recorded.
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
    env = {"CUDA_INJECTION64_PATH": str(lib), "NVTX_INJECTION64_PATH": libcupti, "LD_LIBRARY_PATH": ":".join(path)}
    if out is not None:
        env[ENV_OUT] = str(Path(out).absolute())
    if token is not None:
        env[ENV_TOKEN] = str(token)
    return env


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
# The profile backend
# ---------------------------------------------------------------------------

CAPTURE_FILE = "profile_cupti.txt"
CACHE = ("_cache", "cupti")                  # under the jobs root, when config.json names no cache_dir
_LIBRARIES: dict[Path, Path] = {}           # cache folder -> library, once per process


def cache_dir(req: Request) -> Path:
    """Where the library is kept: the request's cache_dir, else <jobs root>/_cache/cupti."""
    return Path(req.cache_dir) if req.cache_dir else req.job_dir.parent.parent.joinpath(*CACHE)


def _library_for(req: Request) -> Path:
    folder = cache_dir(req)
    if folder not in _LIBRARIES:
        _LIBRARIES[folder] = library(folder)
    return _LIBRARIES[folder]


def _setup(req: Request) -> None:
    _library_for(req)


def _invocation(req: Request) -> Invocation:
    out = req.job_dir / CAPTURE_FILE
    return Invocation(req.program(), out, env=environment(_library_for(req), out, token=req.gpu_token),
                      capture=WHOLE_RUN)


def _timed(inv: Invocation) -> bool:
    """The program opened a timed NVTX "iteration" range (a program without them cannot say)."""
    try:
        return any(m.kind == "S" and m.name == "iteration" for m in read_capture(inv.output).marks)
    except SweepError:
        return False


def _parse(inv: Invocation, stdout: str) -> Parsed:
    cap = parse(inv.output)
    return Parsed(list(cap.measurements), forward_from_stdout(stdout), stdout,
                  env={"cupti": cap.summary(), "iterations": cap.iterations, "gpu_use": cap.gpu_use,
                       **note(launch.overlap_ns for launch in cap.timed_launches)}, timed_launches=cap.timed_launches,
                  windows=cap.windows)


BACKEND = Backend("cupti", "a CUPTI injection library in the program: every launch, no profiler process or export",
                  _invocation, _parse, timed=_timed, setup=_setup)
