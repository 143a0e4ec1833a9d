"""nsys and ncu capture between cudaProfilerStart and cudaProfilerStop; a program
that never calls them is captured over its whole run instead of failing, and the
result says which window was used. The profilers are stand-ins (tests/data/fakes)
that print and write what the real ones did on the H100."""

from __future__ import annotations

import pytest

from sweep.node.job import Job, Tools
from tests.conftest import DATA, needs_nvcc

FAKES = DATA / "fakes"
TOOLS = Tools(nsys=str(FAKES / "nsys"), ncu=str(FAKES / "ncu"))
pytestmark = needs_nvcc


def profiled_runs(job_dir, backend: str) -> int:
    """Runs of the program under the profiler (nsys export is not one)."""
    lines = (job_dir / "profile.log").read_text().splitlines()
    return sum(1 for l in lines if l.startswith(f"$ {FAKES / backend} ") and " export " not in l)


@pytest.mark.parametrize("backend", ["nsys", "ncu"])
def test_a_program_that_never_calls_cudaProfilerStart_is_captured_over_its_whole_run(job_for, backend):
    # one profiled run per window: at 2 ncu iterations a run would otherwise be repeated for its noise (sweep.node.sampling)
    d = job_for(backend=backend, profile={"ncu_iterations": 2}, run={"repeats": 1, "stopping": "never"})
    r = Job(d, tools=TOOLS).run()
    assert r.status == "ok", r.reason
    assert r.env["capture"] == "whole run" and r.measurements
    assert profiled_runs(d, backend) == 2
    assert "captured nothing in the cudaProfilerApi window (the program never called cudaProfilerStart)" in \
        (d / "profile.log").read_text()


@pytest.mark.parametrize("backend", ["nsys", "ncu"])
def test_a_program_that_calls_cudaProfilerStart_is_captured_over_that_window_in_one_run(job_for, backend, monkeypatch):
    monkeypatch.setenv("FAKE_PROGRAM_CALLS_PROFILER_START", "1")
    # one profiled run per window: at 2 ncu iterations a run would otherwise be repeated for its noise (sweep.node.sampling)
    d = job_for(backend=backend, profile={"ncu_iterations": 2}, run={"repeats": 1, "stopping": "never"})
    r = Job(d, tools=TOOLS).run()
    assert r.status == "ok", r.reason
    assert r.env["capture"] == "cudaProfilerApi" and profiled_runs(d, backend) == 1


def test_a_failed_run_is_not_repeated_over_the_whole_program(job_for):
    d = job_for(backend="nsys", beta_x=3)
    r = Job(d, tools=TOOLS).run()
    assert r.status == "runtime_failed" and profiled_runs(d, "nsys") == 1


def test_the_capture_window_is_a_column_of_the_collected_tables(toy_sweep):
    from sweep.decide import collect

    _, jobs, _, _ = toy_sweep
    c = collect.collect(jobs / "toy")
    ok = c.configs[c.configs["status"] == "ok"]
    assert set(ok["capture"]) == {"the program's own events"} and set(c.measurements["capture"]) == set(ok["capture"])


@pytest.mark.slow
def test_a_launch_refused_under_nsys_is_diagnosed_by_rerunning_the_program_under_the_cupti_library(job_for):
    import sys

    program = [sys.executable, str(FAKES / "cupti_program.py"), "registers_cupti.txt",
               "--stderr", "launch_limits/registers.txt", "--exit", "1"]
    d = job_for(backend="nsys", target={"verify": [], "profile": program})
    r = Job(d, tools=TOOLS).run()
    assert (r.status, r.stage) == ("skipped", "profile")
    assert r.reason.startswith("resource limit: registers per block 131072 registers > 65536 registers "
                               "(heavy_kernel(float*, float const*, int), grid 1x1x1, block 1024x1x1; "
                               "1024 threads x 128 registers per thread): CUDA error at")
    assert (d / "diagnose_cupti.txt").is_file() and profiled_runs(d, "nsys") == 1
