"""Resource limits are invalid configurations, not failures: what ptxas, nvlink and
the CUDA runtime refuse becomes `skipped`, naming the resource, the amount and the
limit. Fed real messages: build logs made here with nvcc 13.0 for sm_90
(tests/data/resource_limits, capture.sh), run outputs and CUPTI captures from an
H100 (tests/data/h100/launch_limits)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from sweep.core import limits
from sweep.node import build
from tests.conftest import DATA, needs_nvcc

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
@needs_nvcc
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


# --- at run time: real H100 output and CUPTI captures of launch_limits.cu ------------

from sweep.profile.cupti_file import read_capture  # noqa: E402

RUNS = DATA / "h100" / "launch_limits"


def refused(what: str, facts: dict | None = None) -> limits.Overflow | None:
    cap = read_capture(RUNS / f"{what}_cupti.txt")
    return limits.from_run((RUNS / f"{what}.txt").read_text(), cap.failures, cap.limits,
                           limits.with_registers(facts or {}, cap.kernels))


@pytest.mark.parametrize("what, resource, amount, limit", [
    ("registers", "registers per block", 131072, 65536),
    ("threads", "threads per block", 2048, 1024),
    ("block_z", "block.z", 128, 64),
    ("grid_y", "grid.y", 70000, 65535),
    ("smem_optin", "dynamic shared memory per block", 233472, 232448),
    ("smem", "dynamic shared memory per block", 65536, 49152),
], ids=["registers", "threads", "block-z", "grid-y", "shared-over-opt-in", "shared-without-opt-in"])
def test_a_launch_the_runtime_refused_names_the_resource_the_amount_and_the_limit(what, resource, amount, limit):
    over = refused(what)
    assert (over.resource, over.amount, over.limit) == (resource, amount, limit)
    assert over.message == (RUNS / f"{what}.txt").read_text().splitlines()[0]


def test_registers_come_from_cuptis_record_of_the_refused_kernel():
    over = refused("registers")
    assert over.detail == "1024 threads x 128 registers per thread"
    assert over.where == "heavy_kernel(float*, float const*, int), grid 1x1x1, block 1024x1x1"
    assert over.reason().startswith("resource limit: registers per block 131072 registers > 65536 registers ("
                                    "heavy_kernel(float*, float const*, int), grid 1x1x1, block 1024x1x1; ")
    assert over.reason().endswith("(cudaGetLastError()): too many resources requested for launch")


def test_a_launch_over_its_launch_bounds_is_told_by_the_bounds_cuobjdump_reads():
    facts = limits.parse_resource_usage((RUNS / "resource_usage.txt").read_text())
    for name, threads in limits.parse_launch_bounds((RUNS / "launch_bounds.txt").read_text()).items():
        facts[name] = limits.KernelFacts(facts[name].registers, facts[name].static_shared, threads)
    over = refused("bounds", facts)
    assert (over.resource, over.amount, over.limit, over.detail) == (
        "threads per block", 512, 256, "the kernel's __launch_bounds__")


def test_without_the_launch_bounds_the_reason_says_what_it_could_not_tell():
    over = refused("bounds")
    assert (over.resource, over.amount, over.limit) == ("threads per block", 512, None)
    assert "__launch_bounds__ may allow fewer" in over.detail


def test_cuobjdump_resource_usage_gives_registers_and_shared_memory_per_kernel():
    facts = limits.parse_resource_usage((RUNS / "resource_usage.txt").read_text())
    assert facts["_Z12heavy_kernelPfPKfi"] == limits.KernelFacts(128, 1024)
    assert facts["_Z14bounded_kernelPf"].registers == 8 and len(facts) == 4
    assert limits.parse_launch_bounds((RUNS / "launch_bounds.txt").read_text()) == {"_Z14bounded_kernelPf": 256}


def test_invalid_argument_without_a_refused_launch_is_not_a_resource_limit():
    text = (RUNS / "threads.txt").read_text()
    assert limits.may_be_refused_launch(text) and limits.from_run(text) is None


def test_too_many_resources_without_a_capture_still_skips_saying_what_is_unknown():
    over = limits.from_run((RUNS / "registers.txt").read_text())
    assert (over.resource, over.amount, over.limit) == ("launch size", None, None)
    assert "cupti backend" in over.where


def test_a_launch_that_went_through_is_no_resource_limit():
    assert refused("ok") is None and read_capture(RUNS / "ok_cupti.txt").failures == ()
