"""Building a job folder: make through the cache, and what a failure means."""

from __future__ import annotations

import shutil

import pytest

from sweep.node import build
from sweep.core.errors import SweepError

NVCC_STATIC_ASSERT = """\
/work/main/tests/data/toy_target/alpha.cu(3): error: static assertion failed with "ALPHA_BLOCK must be <= 512 (toy rule)"
  static_assert(1024 <= 512, "ALPHA_BLOCK must be <= 512 (toy rule)");
  ^
1 error detected in the compilation of "/work/main/tests/data/toy_target/alpha.cu".
make[1]: *** [Makefile:13: alpha.o] Error 1
"""
NVCC_ERROR = """\
nvcc -std=c++17 -O3 -c units/matmul.cu -o obj/matmul.o
kernels/matmul.cuh(42): error: identifier "acc" is undefined
      acc += 1;
      ^
1 error detected in the compilation of "kernels/units/matmul.cu".
make[1]: *** [Makefile:78: obj/matmul.o] Error 1
make: *** [Makefile:20: all] Error 2
"""
GCC_ERROR = "prog.cpp:3:5: error: expected ';' before '}' token\nmake: *** [Makefile:2: all] Error 1\n"
MAKE_ONLY = "make: *** No rule to make target 'units/nope.cu', needed by 'obj/nope.o'.  Stop.\n"


@pytest.mark.parametrize("log, status, reason", [
    (NVCC_STATIC_ASSERT, "skipped", "static_assert: ALPHA_BLOCK must be <= 512 (toy rule)"),
    (NVCC_ERROR, "compile_failed", 'kernels/matmul.cuh(42): error: identifier "acc" is undefined'),
    (GCC_ERROR, "compile_failed", "prog.cpp:3:5: error: expected ';' before '}' token"),
    (MAKE_ONLY, "compile_failed", "make: *** No rule to make target 'units/nope.cu', needed by 'obj/nope.o'.  Stop."),
], ids=["static-assert-is-an-illegal-config", "nvcc-error", "gcc-error", "make-error"])
def test_failed_build_log_is_classified_with_its_most_telling_line(log, status, reason):
    assert build.classify_failure(log) == (status, reason)


def test_auto_arch_without_nvidia_smi_says_what_to_set(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SweepError, match="set build.arch .*--arch sm_90"):
        build.resolve_arch(["auto"])


def test_explicit_arch_list_needs_no_gpu():
    assert build.resolve_arch(["sm_80", "sm_90"]) == "sm_80 sm_90"
