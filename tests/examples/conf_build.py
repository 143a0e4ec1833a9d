"""The examples' build as a sweep runs it, for their tests: `make` with a conf.cuh of the given
macros first on the include path (CONF_DIR), into a build folder of the test's own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import sweep.node.objcache

OBJCACHE = Path(sweep.node.objcache.__file__)


def sweeps_nvcc(tmp: Path) -> str:
    """NVCC as a sweep sets it: several words, its object cache (in tmp/objcache) in front of nvcc."""
    return f"{sys.executable} -I {OBJCACHE} --dir {tmp / 'objcache'} -- nvcc"


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
