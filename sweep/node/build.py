"""Build a job folder with make, through the object cache.

The outcome is one of three:
    ok              the programs were built
    skipped         the configuration is illegal: a static_assert in the target's
                    headers fired (the message says which rule), or ptxas or
                    nvlink refused a kernel for the resources it needs (shared
                    memory, registers, constant memory: sweep.core.limits names the
                    resource, the amount and the limit); Kernel Tuner calls this
                    an invalid config
    compile_failed  anything else, with the first compiler, ptxas or linker error
                    line as the reason (never make's own "Error 2"): the log path
                    says where to look; sources are left as they were, so the
                    error can be reproduced by hand with `make -C <job>`
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sweep.core import limits, safe
from sweep.node import group, resources
from sweep.core.errors import NO_SPACE, DiskFull, SweepError

STATIC_ASSERT = re.compile(r'static assertion failed with "(?P<msg>[^"]*)"|static_assert failed[:,]? "?(?P<msg2>[^"\n]*)')
COMPILER_ERROR = re.compile(r"(\(\d+\)|:\d+:\d*:?)\s*(fatal )?error\b|\berror(:| #\d+)", re.I)
# CUDA's own tools write "ptxas error   : ...", "nvlink error   : ...", "nvcc fatal   : ...",
# "ptxas /tmp/x.ptx, line 28; error   : ..." (the spaces before the colon defeat COMPILER_ERROR)
TOOL_ERROR = re.compile(r"^(ptxas|nvlink|nvcc|fatbinary|cicc|cudafe\+\+)\b[^:]*?\b(error|fatal)\s*:")
MAKE_LINE = re.compile(r"^make(\[\d+\])?: ")
INTERRUPTED = re.compile(r"^make(\[\d+\])?: \*\*\* .*\] (Interrupt|Terminated)$", re.M)
CACHE_LINE = re.compile(r"^objcache: (hit|miss) (\S+)", re.M)


class BuildInterrupted(Exception):
    """The build was stopped from outside (an interrupt): the job records nothing."""


STOP_GRACE_S = 1.0    # how long a failed build waits for word that its driver was interrupted


def never(timeout: float = 0.0) -> bool:
    """A build's stop word that never comes (the default: no driver to interrupt it)."""
    return False


@dataclass(frozen=True, slots=True)
class BuildOutcome:
    status: str                  # ok | skipped | compile_failed
    reason: str
    log: Path
    seconds: float
    arch: str
    compiled: tuple[str, ...] = field(default=())   # objects nvcc compiled
    cached: tuple[str, ...] = field(default=())     # objects copied from the cache
    kernels: tuple[dict, ...] = field(default=())   # per kernel: registers, spills, shared memory (sweep.node.resources)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def detect_arch() -> str:
    """sm_XY of the first visible GPU, from nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        raise SweepError("build.arch is auto but this machine has no nvidia-smi to read the GPU from; "
                         "set build.arch (e.g. sm_90) in the space file or pass --arch sm_90")
    r = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True)
    cap = r.stdout.strip().splitlines()[0].strip() if r.returncode == 0 and r.stdout.strip() else ""
    if not re.fullmatch(r"\d+\.\d+", cap):
        raise SweepError(f"nvidia-smi did not report a compute capability ({r.stderr.strip() or r.stdout.strip()!r}); "
                         "set build.arch (e.g. sm_90) or pass --arch")
    return "sm_" + cap.replace(".", "")


def known_archs(nvcc: str = "nvcc") -> set[str] | None:
    """The real architectures this nvcc compiles for (`nvcc --list-gpu-code`), None when it cannot say."""
    try:
        r = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = set(r.stdout.split()) if r.returncode == 0 else set()
    return names or None


def check_archs(archs: list[str] | tuple[str, ...]) -> None:
    """Refuse an architecture name this machine's nvcc does not know (e.g. sm90 for sm_90)."""
    wanted = [a for a in archs if a != "auto"]
    known = known_archs() if wanted and shutil.which("nvcc") else None
    if known is None:
        return
    for a in wanted:
        base = re.sub(r"a$", "", a)     # sm_90a: the arch-specific variant of sm_90
        if a not in known and base not in known:
            raise SweepError(f"architecture {a!r} is not one nvcc here compiles for; choose one of "
                             f"{', '.join(sorted(known, key=lambda x: int(re.sub(r'[^0-9]', '', x) or 0)))} "
                             "(build.arch or --arch)")


def object_digests(build_dir: Path) -> dict[str, str]:
    """sha256 (16 hex digits) of every object a build produced: configurations whose
    macros differ but whose objects are byte-identical were not changed by their conf.cuh."""
    import hashlib

    out = {}
    for p in sorted(Path(build_dir).rglob("*.o")):
        out[str(p.relative_to(build_dir))] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
    return out


def resolve_arch(arch: list[str] | tuple[str, ...]) -> str:
    return detect_arch() if list(arch) == ["auto"] else " ".join(arch)


def build(job_dir: Path, arch: str, jobs: int = 0, timeout_s: float = 3600,
          stop: Callable[[float], bool] = never) -> BuildOutcome:
    """Run make in `job_dir` (ARCH overridden), logging to job_dir/build.log. `stop(timeout)` (an
    Event's wait) true: the build is being interrupted (the local executor's driver got Ctrl-C while
    this ran on one of its threads): make is stopped and BuildInterrupted raised, whatever make's
    own exit says (run_make)."""
    job_dir = Path(job_dir)
    log = job_dir / "build.log"
    if not shutil.which("make"):
        raise SweepError("make is not installed on this machine; install it (Debian: apt install make)")
    if stop(0.0):       # a build the pool started after its driver's interrupt: make never starts
        raise BuildInterrupted("make was stopped before it started")
    jobs = jobs or len(os.sched_getaffinity(0))
    cmd = ["make", "-C", str(job_dir), f"-j{jobs}", f"ARCH={arch}"]
    mark = group.new_mark()
    t0 = time.monotonic()
    with safe.open_nofollow(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        rc, why = run_make(cmd, f, timeout_s, stop, mark)
    seconds = time.monotonic() - t0
    if why == "deadline":
        return BuildOutcome("compile_failed", f"make did not finish in {timeout_s:.0f} s", log, seconds, arch)
    text = log.read_text(errors="replace")
    if why == "stopped" or rc < 0 or INTERRUPTED.search(text):  # stopped from outside: not this configuration's result
        raise interrupted(mark, f"make was stopped ({why or ('signal ' + str(-rc) if rc < 0 else 'Interrupt')})")
    compiled = tuple(m.group(2) for m in CACHE_LINE.finditer(text) if m.group(1) == "miss")
    cached = tuple(m.group(2) for m in CACHE_LINE.finditer(text) if m.group(1) == "hit")
    if rc == 0:
        return BuildOutcome("ok", "", log, seconds, arch, compiled, cached, tuple(resources.kernels(text)))
    written = folder_bytes(job_dir / "build")
    if NO_SPACE in text or out_of_space(job_dir, written):  # not this configuration's fault: the run ends, the
        shutil.rmtree(job_dir / "build", ignore_errors=True)  # half-built objects go
        raise DiskFull.at(job_dir, written)
    outcome = BuildOutcome(*classify_failure(text), log, seconds, arch, compiled, cached)
    if outcome.status == "compile_failed" and stop(STOP_GRACE_S):   # make's exit cannot say (run_make)
        raise interrupted(mark, "make failed while its driver was being interrupted")
    return outcome


def interrupted(mark: str, reason: str) -> BuildInterrupted:
    """The build was stopped from outside: whatever make left running ends first (make exited, but a
    sub-make its signal reached late may build on, orphaned), so that nothing outlives the build."""
    group.end_marked(mark)
    return BuildInterrupted(reason)


def run_make(cmd: list[str], log, timeout_s: float, stop: Callable[[float], bool], mark: str) -> tuple[int, str]:
    """make in this process's group, so that a Ctrl-C, or a kill of the whole group, reaches it with
    its driver (in a group of its own it outlived a driver killed with kill -9, and the rerun's make
    built beside it), carrying `mark` in its environment (group.MARK), as every process under it
    will. Interrupted alongside its driver, make's exit cannot say so: GNU make interrupted while
    reaping can exit 2 ("wait: No child processes"), and a compiler launcher killed while starting
    up is reported as an ordinary "Error 1" (a flaky Ctrl-C test recorded such builds as
    compile_failed). So build() has a compile failure wait up to STOP_GRACE_S for the word
    `stop(timeout)` (an Event's wait: the local executor's cancel() sets it once its main thread has
    taken the interrupt, milliseconds after the signal). (exit code, why it ended): "" it ended by
    itself; "deadline" after timeout_s; "stopped" stop came true. A KeyboardInterrupt here (a build
    on a process's main thread: make got the signal too) ends make and goes on."""
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, group.MARK: mark})
    deadline = time.monotonic() + timeout_s
    why = ""
    ended_by_itself = False
    try:
        while p.poll() is None:
            if stop(0.0):
                why = "stopped"
            elif time.monotonic() >= deadline:
                why = "deadline"
            if why:
                break
            try:
                p.wait(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
        ended_by_itself = not why
    finally:
        # Stopped, past its deadline, or interrupted on this thread: SIGTERM to make (it deletes
        # half-made targets) and to every process under it, found by the mark: a sub-make forked
        # just after a Ctrl-C missed that signal, and make, killed once its grace ran out, left it
        # building on (the full suite's Ctrl-C test found one make alive after its driver)
        if not ended_by_itself:
            group.end_marked(mark)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    return p.returncode, why


def out_of_space(job_dir: Path, written_bytes: int, floor_bytes: int = 1 << 20) -> bool:
    """Whether the filesystem holding job_dir had no room left when a build failed. The
    build log lives on that filesystem too, so on a full disk it may have lost the very
    line saying so (make: write error: stdout): the free space is the evidence that stays.
    Less than `floor_bytes`, or less than the build had written so far, counts as full."""
    try:
        free = shutil.disk_usage(job_dir).free
    except OSError:
        return False
    return free < max(floor_bytes, written_bytes)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file() and not p.is_symlink())


def classify_failure(text: str) -> tuple[str, str]:
    """(status, reason) of a failed build log: a static_assert or a resource the
    compiler refused means an illegal configuration (skipped), anything else a
    compile failure."""
    m = STATIC_ASSERT.search(text)
    if m:
        return "skipped", "static_assert: " + (m.group("msg") or m.group("msg2") or "").strip()
    over = limits.from_build_log(text)
    if over is not None:
        return "skipped", over.reason()[:500]
    if "nvcc: not found" in text or "nvcc: command not found" in text or "No such file or directory: 'nvcc'" in text:
        return "compile_failed", "nvcc not found on the build node: load CUDA there (slurm.setup, e.g. 'module load cuda')"
    return "compile_failed", first_error(text)[:300]


def first_error(text: str) -> str:
    """The most telling line of a failed build: a compiler, ptxas or linker diagnostic
    (file(line): error ..., ptxas error : ...), else the last line of a Python
    traceback, else make's own complaint (a missing rule or file)."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if TOOL_ERROR.search(l) or (COMPILER_ERROR.search(l) and not MAKE_LINE.match(l)):
            return l
    for i, l in enumerate(lines):
        if l.startswith("Traceback"):
            tail = next((x for x in lines[i + 1:] if re.match(r"^\w+(Error|Exception)\b", x)), None)
            if tail:
                return tail
    return next((l for l in lines if "***" in l), lines[-1] if lines else "make failed (see the log)")
