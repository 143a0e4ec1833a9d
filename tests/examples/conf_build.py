"""The examples' build as a sweep runs it, for their tests: `make` with a conf.cuh of the given
macros first on the include path (CONF_DIR), into a build folder of the test's own."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import sweep.node.objcache
from sweep.node.build import classify_failure

OBJCACHE = Path(sweep.node.objcache.__file__)


def sweeps_nvcc(tmp: Path) -> str:
    """NVCC as a sweep sets it: several words, its object cache (in tmp/objcache) in front of nvcc."""
    return f"{sys.executable} -I {OBJCACHE} --dir {tmp / 'objcache'} -- nvcc"


def built(example: Path, tmp: Path, macros: dict[str, int] | None = None) -> Path:
    """The example built for this machine's GPU, with its default launch sizes or these macros'
    (make_with_conf), into tmp/build: that folder."""
    from sweep.node.build import detect_arch

    p = make_with_conf(example, tmp, macros, arch=detect_arch())
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return tmp / "build"


def make_with_conf(example: Path, tmp: Path, macros: dict[str, int] | None = None, arch: str = "sm_90",
                   extra: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """`make -C example` for `arch` into tmp/build; with macros, from tmp/conf/conf.cuh defining them;
    `extra`: more VARIABLE=value words (NVCC=..., NVCCFLAGS=...)."""
    variables = [f"BUILD_DIR={tmp / 'build'}", f"ARCH={arch}", *extra]
    if macros:
        conf = tmp / "conf"
        conf.mkdir()
        (conf / "conf.cuh").write_text("".join(f"#define {k} {v}\n" for k, v in macros.items()))
        variables.append(f"CONF_DIR={conf}")
    return subprocess.run(["make", "-C", str(example), *variables], capture_output=True, text=True, timeout=600)


def refused_at_static_assert(example: Path, tmp: Path, macros: dict[str, int]) -> str:
    """The example built with these (illegal) macros: the build fails, and fails as a sweep records
    a configuration skipped for a broken rule (a static_assert); returns the reason the sweep
    records, for the caller to check that it names the rule."""
    p = make_with_conf(example, tmp, macros)
    assert p.returncode != 0
    kind, reason = classify_failure(p.stdout + p.stderr)
    assert kind == "skipped", (kind, reason)
    return reason


def kernel_symbols(program: Path, demangle: bool = False) -> str | None:
    """The program's symbols as nm lists them (demangled: `kernel<32, 8>`), or None where nm is not
    installed (the caller then skips its look at which kernels were instantiated)."""
    if shutil.which("nm") is None:
        return None
    return subprocess.run(["nm", *(["-C"] if demangle else []), str(program)], capture_output=True, text=True).stdout


def refused_before_cuda(program: Path, args: Sequence[str], says: str) -> None:
    """An example's program given a bad problem refuses it while parsing its arguments, before any
    CUDA call (so this runs without a GPU): exit 2, one message on stderr that `says`, nothing on stdout."""
    bad = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and says in bad.stderr and bad.stdout == "", bad.stdout + bad.stderr


def checked_then_timed(program: Path, args: Sequence[str], tmp: Path, rate: str) -> dict:
    """Runs an example's program as a sweep does: --check-only must pass, then a timed run of 5
    iterations prints its check, median and `rate` and writes the events JSON; returns the one
    kernel's entry of that JSON (an example's program times one kernel)."""
    p = subprocess.run([str(program), *args, "--check-only"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "check: ok" in p.stdout, p.stdout + p.stderr
    events = tmp / "events.json"
    p = subprocess.run([str(program), *args, "--iters", "5", "--json", str(events)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "check: ok" in p.stdout and ": median" in p.stdout and rate in p.stdout
    timing = json.loads(events.read_text())
    assert timing["schema"] == "engine-timing/1" and timing["program"] == program.name
    (kernel,) = timing["kernels"]
    assert len(kernel["iter_total_ns"]) == 5 and all(t > 0 for t in kernel["iter_total_ns"])
    return kernel
