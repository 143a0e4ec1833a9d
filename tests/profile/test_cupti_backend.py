"""The cupti backend in a job: the injection library built once in the jobs' cache
(in the build stage, off the GPU), the program run with it, its capture parsed.
The program is a stand-in (tests/data/fakes/cupti_program.py) that writes a real
H100 capture where the library would have; the library is built with real nvcc."""

from __future__ import annotations

import sys

import pytest

from sweep import profile
from sweep.node.job import Job
from tests.conftest import DATA, needs_nvcc

pytestmark = [pytest.mark.slow, needs_nvcc]
PROGRAM = str(DATA / "fakes" / "cupti_program.py")


def cupti_job(job_for, capture: str, *extra: str, **overrides):
    target = {"verify": [], "profile": [sys.executable, PROGRAM, capture, *extra], **overrides.pop("target", {})}
    return job_for(backend="cupti", target=target, **overrides)


def test_cupti_is_a_registered_backend_needing_no_profiler_executable():
    be = profile.backend("cupti")
    assert be.tool is None and be.setup is not None and "cupti" in profile.BACKENDS


def test_the_library_is_built_in_the_build_stage_in_the_jobs_cache(job_for):
    d = cupti_job(job_for, "gemm_nvtx.txt")
    r = Job(d).run("build")
    assert r.status == "ok"
    libs = list((d.parents[1] / "_cache" / "cupti").glob("libsweep_cupti-*.so"))
    assert len(libs) == 1 and libs[0].with_suffix(".json").is_file()


def test_a_cupti_job_measures_each_launch_shape_in_the_timed_nvtx_iterations(job_for):
    d = cupti_job(job_for, "gemm_nvtx.txt")
    r = Job(d).run()
    assert r.status == "ok", r.reason
    assert {(m.kernel, m.grid) for m in r.measurements} == {
        ("gemm_tiled_kernel", (4, 4, 1)), ("gemm_tiled_kernel", (8, 8, 1)), ("gemm_tiled_kernel", (16, 16, 1))}
    assert all(len(m.iter_total_ns) == 20 for m in r.measurements)
    assert r.env["capture"] == "whole run" and r.env["cupti"] == "complete: 60 of 74 launches in 20 timed iterations"
    assert (d / "profile_cupti.txt").is_file()


def test_a_program_without_nvtx_ranges_is_one_iteration_holding_every_launch(job_for):
    r = Job(cupti_job(job_for, "gemm_shapes.txt")).run()
    assert r.status == "ok" and r.env["iterations"] == 1
    # every launch of each run, and the program repeated for its noise (one iteration a run)
    assert r.sampling.runs >= 5 and sum(m.instances for m in r.measurements) == 74 * r.sampling.runs


def test_a_self_checking_program_that_fails_before_its_first_iteration_range_is_verify_failed(job_for):
    d = cupti_job(job_for, "gemm_shapes.txt", "--exit", "1", target={"verify": "profile"})
    r = Job(d).run()
    assert (r.status, r.stage) == ("verify_failed", "verify")


def test_a_self_checking_program_that_fails_inside_its_timed_iterations_is_runtime_failed(job_for):
    d = cupti_job(job_for, "gemm_abort.txt", "--exit", "1", target={"verify": "profile"})
    r = Job(d).run()
    assert (r.status, r.stage) == ("runtime_failed", "profile")
