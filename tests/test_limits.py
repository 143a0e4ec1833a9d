"""Resource limits are invalid configurations, not failures: what ptxas, nvlink and
the CUDA runtime refuse becomes `skipped`, naming the resource, the amount and the
limit. Fed real messages: build logs made here with nvcc 13.0 for sm_90
(tests/data/resource_limits, capture.sh), run outputs and CUPTI captures from an
H100 (tests/data/h100/launch_limits)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from sweep import build, limits
from tests.conftest import DATA

LOGS = DATA / "resource_limits"


@pytest.mark.parametrize("log, reason", [
    ("shared.log", "resource limit: shared memory per block 98304 bytes > 49152 bytes (big_tile(float*)): "
                   "ptxas error   : Entry function '_Z8big_tilePf' uses too much shared data (0x18000 bytes, 0xc000 max)"),
    ("constant.log", "resource limit: constant memory 80000 bytes > 65536 bytes (the whole file): "
                     "ptxas error   : File uses too much global constant data (0x13880 bytes, 0x10000 max)"),
    ("regcount.log", "resource limit: registers per thread 140 registers > 64 registers (bounded(float*, float const*); "
                     "it calls dot64(float const*), compiled for 140 registers, where its launch bounds allow 64): "
                     "nvlink error   : entry function '_Z7boundedPfPKf' with max regcount of 64 calls function "
                     "'_Z5dot64PKf' with regcount of 140"),
], ids=["ptxas-shared-memory", "ptxas-constant-memory", "nvlink-registers"])
def test_a_build_that_overflows_a_resource_is_skipped_with_the_resource_the_amount_and_the_limit(log, reason):
    if shutil.which("c++filt") is None:
        pytest.skip("c++filt (binutils) is not installed: names stay mangled")
    assert build.classify_failure((LOGS / log).read_text()) == ("skipped", reason)


def test_any_other_compile_failure_gives_the_first_ptxas_error_line_not_makes():
    status, reason = build.classify_failure((LOGS / "unsupported.log").read_text())
    assert status == "compile_failed"
    assert reason == "ptxas /tmp/tmpxft.ptx, line 26; error   : Instruction 'setmaxnreg.inc' not supported on .target 'sm_90'"


@pytest.mark.parametrize("line", [
    "nvcc fatal   : Unsupported gpu architecture 'compute_12'",
    "nvlink error   : Undefined reference to '_Z3fooi' in 'build/a.o'",
], ids=["nvcc-fatal", "nvlink-undefined"])
def test_cuda_tool_errors_are_the_reason_rather_than_makes_error_line(line):
    log = f"nvcc -c a.cu -o build/a.o\n{line}\nmake: *** [Makefile:9: build/a.o] Error 255\n"
    assert build.classify_failure(log) == ("compile_failed", line)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("name, status", [("shared", "skipped"), ("constant", "skipped"), ("regcount", "skipped"),
                                          ("unsupported", "compile_failed")])
def test_the_committed_build_logs_are_what_nvcc_here_says(tmp_path, name, status):
    p = subprocess.run(["make", "--no-print-directory", "-C", str(LOGS), f"BUILD_DIR={tmp_path}", name],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode != 0
    text = (p.stdout + p.stderr).replace(str(tmp_path), "BUILD").replace(str(LOGS), "SRC")
    assert build.classify_failure(text)[0] == status
    committed = [l for l in (LOGS / f"{name}.log").read_text().splitlines() if "error" in l or "fatal" in l]
    here = [l for l in text.splitlines() if "error" in l or "fatal" in l]
    assert [l.split(".ptx, line")[-1] for l in here] == [l.split(".ptx, line")[-1] for l in committed]
