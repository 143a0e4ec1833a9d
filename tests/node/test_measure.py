"""A job over a space's workloads (sweep.node.measure): one build, every workload measured with its own
program and sizes, each in a folder of its own, the rows named after their workload, the check
run once per program (on its first workload), and a later workload's failure named."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweep.node import measure
from sweep.records.evidence import Sampled
from sweep.node.job import Job
from tests.conftest import needs_nvcc

pytestmark = needs_nvcc

SMALL = {"small": {"profile": ["{build}/toy_bench", "-n", "{iterations}", "--size", "64"],
                   "events": ["--json", "{events_json}"]}}
# small's program as a space file declares one that checks itself when given --check (verify: profile)
CHECKING_SMALL = {"small": {**SMALL["small"], "check_args": ["--check"]}}
TWO = [{"name": "big", "seq_len": 1024}, {"name": "small", "program": "small", "iterations": 3, "weight": 2}]


def two_workloads(job_for, programs=SMALL, workloads=TWO, target=None, **kw):
    """A rendered toy job over `workloads`, its target's programs `programs` (and `target`'s keys)."""
    return job_for(target={"programs": programs, **(target or {})}, workloads=workloads, **kw)


def test_a_job_is_built_once_and_measures_every_workload_naming_its_rows(job_for):
    d = two_workloads(job_for)
    r = Job(d).run()
    assert r.status == "ok", r.reason
    by = {(m.workload, m.kernel): m for m in r.measurements}
    assert set(by) == {(w, k) for w in ("big", "small") for k in ("alpha_kernel", "beta_kernel")}
    assert len(by["big", "alpha_kernel"].iter_total_ns) == 7 and len(by["small", "alpha_kernel"].iter_total_ns) == 3
    # toy_bench --size 64: alpha_kernel at ALPHA_BLOCK=128 is 30% slower than at its best there
    assert by["small", "alpha_kernel"].total_median_ns == pytest.approx(1.3 * by["big", "alpha_kernel"].total_median_ns,
                                                                        rel=0.03)
    for w in ("big", "small"):
        folder = d / measure.WORKLOADS / w
        assert (folder / "events.json").is_file() and (folder / "profile.log").read_text().count("\n$ ") == 1
    assert not (d / "events.json").exists() and (d / "build.log").is_file()
    assert set(r.env["workloads"]) == {"big", "small"} and r.sampling.runs == 2 and r.sampling.samples == 3
    assert "--size" in (d / measure.WORKLOADS / "small" / "profile.log").read_text()


def test_each_workloads_env_says_whether_its_launches_overlapped(job_for):
    d = two_workloads(job_for)
    job = Job(d)
    plain = job.backend.parse

    def parse(inv, stdout):   # as cupti or nsys report a run whose kernels overlapped (sweep.profile.overlap)
        p = plain(inv, stdout)
        return replace(p, env={**p.env, "overlap": "3 launches started before the kernel ahead"}) \
            if inv.output.parent.name == "small" else p

    job.backend = replace(job.backend, parse=parse)
    r = job.run()
    assert r.status == "ok", r.reason
    assert r.env["workloads"]["small"]["overlap"].startswith("3 launches") and "overlap" not in r.env["workloads"]["big"]


def test_the_check_commands_run_once_with_the_first_workloads_placeholders(job_for):
    d = two_workloads(job_for, target={"verify": [["{build}/toy_check", "{seq_len}"]]})
    r = Job(d).run()
    assert r.status == "ok", r.reason
    log = (d / "verify.log").read_text()
    assert log.count("\n$ ") == 1 and "toy_check 1024" in log


def test_only_the_first_workload_of_each_program_carries_its_check_arguments(job_for):
    three = [*TWO, {"name": "big_short", "seq_len": 64}, {"name": "small_again", "program": "small", "weight": 1}]
    d = two_workloads(job_for, programs=CHECKING_SMALL, workloads=three,
                      target={"verify": "profile", "check_args": ["--check"]})
    job = Job(d)
    carries = ["--check" in m.program() for m in job.measuring]
    assert carries == [True, True, False, False]        # big (default program), small; not their repeats
    assert job.program() == job.measuring[0].program()


def test_a_later_programs_check_is_made_only_where_it_has_check_arguments():
    spec = measure.Spec("w", 1, 1, 1, 0, (), ("{build}/a",), check_args=("--check",))
    other = measure.Spec("v", 1, 1, 1, 0, (), ("{build}/b",))
    assert measure.checking([spec, other]) == [True, False]
    assert measure.checking([other, replace(spec, name="x")]) == [True, True]
    assert measure.checking([spec, replace(spec, name="x", seq_len=8)]) == [True, False]


def test_a_wrong_result_found_by_a_later_programs_check_is_verify_failed_and_named(job_for):
    d = two_workloads(job_for, programs=CHECKING_SMALL, alpha=96, target={"verify": "profile"})   # big's has none
    r = Job(d).run()
    assert (r.status, r.stage) == ("verify_failed", "verify")
    assert r.reason.startswith("workload small: toy_bench exit 1 before its timed part")


def test_a_wrong_result_found_on_the_first_workload_is_verify_failed_and_named(job_for):
    d = two_workloads(job_for, alpha=96, target={"verify": "profile", "check_args": ["--check"]})
    r = Job(d).run()
    assert (r.status, r.stage) == ("verify_failed", "verify")
    assert r.reason.startswith("workload big: toy_bench exit 1 before its timed part")
    assert not (d / measure.WORKLOADS / "small").exists()             # the later workloads never ran


def test_a_later_workload_that_fails_is_runtime_failed_not_a_failed_check_and_named(job_for):
    failing = {"small": {"profile": ["{build}/toy_bench", "--check", "-n", "{iterations}"],
                         "events": ["--json", "{events_json}"]}}
    d = two_workloads(job_for, programs=failing, alpha=96, target={"verify": "profile"})
    r = Job(d).run()
    assert (r.status, r.stage) == ("runtime_failed", "profile")
    assert r.reason.startswith("workload small: toy_bench exit 1") and r.log.endswith("workloads/small/profile.log")


def test_a_workload_program_the_build_did_not_make_fails_the_build_before_any_gpu_time(job_for):
    missing = {"small": {"profile": ["{build}/toy_missing", "-n", "{iterations}"]}}
    r = Job(two_workloads(job_for, programs=missing)).run()
    assert (r.status, r.stage) == ("compile_failed", "build") and "toy_missing" in r.reason
    assert "profile" not in r.timings


def test_a_jobs_sampling_sums_its_workloads_runs_and_keeps_the_fewest_samples_and_worst_noise():
    a = Sampled(runs=1, samples=7, source="iterations", noise=0.01, noisiest="k 1x1x1 32x1x1", elapsed_s=1.0)
    b = Sampled(runs=5, samples=5, source="runs", noise=0.02, noisiest="k 2x1x1 32x1x1", adaptive=True,
                stopped={"samples": 5, "noise": 0.02, "reason": "converged", "elapsed_s": 2.0}, throttled_runs=1,
                elapsed_s=2.5)
    s = measure.combined([("big", a), ("small", b)])
    assert (s.runs, s.samples, s.source, s.noise, s.noisiest) == (6, 5, "runs", 0.02, "small: k 2x1x1 32x1x1")
    assert s.adaptive and s.stopped["reason"] == "converged" and s.throttled_runs == 1 and s.elapsed_s == 3.5
    assert measure.combined([("", a)]) is a


@pytest.mark.slow
def test_a_cupti_job_writes_each_workloads_capture_in_its_folder_and_parses_it_there(job_for):
    """The program is a stand-in (tests/data/fakes/cupti_program.py) writing a real H100 capture where the
    injection library would: another capture per workload, as another problem size would give."""
    import sys

    from tests.conftest import DATA

    program = [sys.executable, str(DATA / "fakes" / "cupti_program.py"), "{args}"]
    d = job_for(backend="cupti", target={"verify": [], "profile": program},
                workloads=[{"name": "a", "args": ["gemm_nvtx.txt"]}, {"name": "b", "args": ["gemm_tiles_b_nvtx.txt"]}])
    r = Job(d).run()
    assert r.status == "ok", r.reason
    grids = {w: {m.grid for m in r.measurements if m.workload == w} for w in ("a", "b")}
    assert grids == {"a": {(4, 4, 1), (8, 8, 1), (16, 16, 1)}, "b": {(4, 2, 1), (8, 4, 1), (16, 8, 1)}}
    assert {len(m.iter_total_ns) for m in r.measurements if m.workload == "b"} == {10}
    assert all((d / measure.WORKLOADS / w / "profile_cupti.txt").is_file() for w in ("a", "b"))
    assert r.env["capture"] == "whole run" and set(r.env["workloads"]) == {"a", "b"}
