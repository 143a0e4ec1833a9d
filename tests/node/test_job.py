"""One job on a node: build -> verify -> profile -> result.json, and its failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.node import render
from sweep.space import target
from sweep.core.errors import SweepError
from sweep.node.job import Job, JobResult, Tools, expand, read_result, write_result
from tests.conftest import needs_nvcc

pytestmark = needs_nvcc


def test_good_config_records_ok_with_measurements_timings_and_build_facts(job_for):
    r = Job(job_for()).run()
    assert r.status == "ok" and r.reason == ""
    kernels = {m.kernel: m for m in r.measurements}
    assert set(kernels) == {"alpha_kernel", "beta_kernel"}
    assert kernels["alpha_kernel"].block == (128, 1, 1) and len(kernels["alpha_kernel"].iter_total_ns) == 7
    assert set(r.timings) >= {"build", "verify", "profile", "parse", "total"}
    assert r.build["compiled"] and r.env["gpu"].startswith("toy")
    assert read_result(job_for()) == r  # result.json round-trips


def test_wrong_results_are_verify_failed_and_never_profiled(job_for):
    d = job_for(alpha=96)
    r = Job(d).run()
    assert (r.status, r.stage) == ("verify_failed", "verify")
    assert "ALPHA_BLOCK=96 computes wrong results" in r.reason and r.log.endswith("verify.log")
    assert r.measurements == () and not (d / "events.json").exists()


def test_static_assert_is_skipped_with_the_rule(job_for):
    r = Job(job_for(alpha=1024)).run()
    assert (r.status, r.stage) == ("skipped", "build")
    assert r.reason == "static_assert: ALPHA_BLOCK must be <= 512 (toy rule)"


def test_crashing_program_is_runtime_failed_with_the_signal(job_for):
    r = Job(job_for(beta_x=3)).run()
    assert (r.status, r.stage) == ("runtime_failed", "profile")
    assert "toy_bench was killed by SIGABRT" in r.reason and r.log.endswith("profile.log")


def test_missing_profiler_is_runtime_failed_naming_the_variable_to_set(job_for):
    d = job_for(backend="nsys")
    r = Job(d, tools=Tools(nsys=None, ncu=None)).run()
    assert r.status == "runtime_failed" and "set NSYS=/path/to/nsys" in r.reason


def test_second_attempt_keeps_the_first_in_history(job_for):
    d = job_for(alpha=96)
    first = Job(d).run()
    second = Job(d).run()
    assert second.attempt == 2 and second.history == ({"status": first.status, "stage": first.stage, "reason": first.reason},)


def test_a_job_the_scheduler_requeued_records_the_requeue_after_its_own_last_record(job_for, monkeypatch):
    d = job_for()
    first = Job(d).run()
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    again = Job(d).run()
    assert again.status == "ok" and again.attempt == 2
    assert [h["status"] for h in again.history] == [first.status, "requeued"]
    assert "restart 1" in again.history[-1]["reason"]


def test_job_leaves_no_state_file_when_done(job_for):
    d = job_for()
    Job(d).run()
    assert not (d / "state.json").exists()


def test_a_result_of_another_schema_is_moved_aside_naming_where_and_counts_as_not_done(tmp_path, capsys):
    """Refusing it looped: the advice said to run again, and the rerun refused the same file."""
    (tmp_path / "result.json").write_text(json.dumps({"schema": "sweep-result/0", "tag": "old"}))
    assert read_result(tmp_path) is None
    aside = list(tmp_path.glob("result.json.stale-*"))
    assert len(aside) == 1 and json.loads(aside[0].read_text())["tag"] == "old"      # kept, not deleted
    err = capsys.readouterr().err
    assert "sweep-result/0" in err and str(aside[0]) in err and "measured again" in err
    assert read_result(tmp_path) is None and not (tmp_path / "result.json").exists()


def test_a_directory_in_place_of_result_json_is_moved_aside_and_counts_as_not_done(tmp_path, capsys):
    (tmp_path / "result.json").mkdir()
    (tmp_path / "result.json" / "inside").write_text("kept")
    assert read_result(tmp_path) is None
    aside = list(tmp_path.glob("result.json.bad-*"))
    assert len(aside) == 1 and (aside[0] / "inside").read_text() == "kept"
    assert "is a directory" in capsys.readouterr().err
    write_result(tmp_path, JobResult(sweep="s", tag="t", config_hash="h", macros={}, status="ok"))
    assert read_result(tmp_path).status == "ok"


def test_damaged_result_counts_as_not_done(tmp_path):
    (tmp_path / "result.json").write_text('{"schema": "sweep-res')
    assert read_result(tmp_path) is None


def test_result_is_written_atomically_without_temporary_leftovers(tmp_path):
    r = JobResult(sweep="s", tag="t", config_hash="h", macros={"A": 1}, status="ok")
    write_result(tmp_path, r)
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


@pytest.mark.parametrize("words, expected", [
    (["{build}/prog", "-b", "{batch}", "{args}"], ["/j/build/prog", "-b", "4", "--fusion", "none"]),
    (["--json={events_json}"], ["--json=/j/events.json"]),
])
def test_command_templates_expand_placeholders_and_args(words, expected):
    values = {"build": "/j/build", "batch": 4, "events_json": "/j/events.json"}
    assert expand(words, values, ["--fusion", "none"]) == expected


def test_unknown_placeholder_names_the_allowed_ones():
    with pytest.raises(SweepError, match="uses 'nope'; placeholders: batch"):
        expand(["{nope}"], {"batch": 1}, [])


def test_device_facts_are_found_among_a_profilers_own_output_lines():
    from sweep.profile import json_tail as _json_tail

    out = ('WARNING: {something} happened\nCollecting data...\n{\n  "schema": "engine-timing/1",\n'
           '  "device": {"name": "NVIDIA H100 80GB HBM3", "cuda_runtime": 13000}\n}\nGenerated: /x/profile.nsys-rep {1}\n')
    assert _json_tail(out)["device"]["cuda_runtime"] == 13000


def _with_verify(d: Path, command: list[str]) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg["target"]["verify"] = [command]
    (d / "config.json").write_text(json.dumps(cfg))


def test_a_program_printing_bytes_that_are_not_utf8_is_recorded_not_a_crash(job_for):
    d = job_for()
    _with_verify(d, ["sh", "-c", r"printf 'bad \377\376 bytes\n' >&2; exit 3"])
    r = Job(d).run()
    assert (r.status, r.stage) == ("verify_failed", "verify")
    assert "exit 3: bad \ufffd\ufffd bytes" in r.reason
    assert b"\xff\xfe" in (d / "verify.log").read_bytes()   # the log keeps the bytes as they were


def test_a_program_that_outlives_its_time_limit_is_timeout_with_its_stage(job_for):
    d = job_for()
    assert Job(d).run("build").status == "ok"
    _with_verify(d, ["sleep", "30"])
    r = Job(d, timeout_s=1).run("measure")
    assert (r.status, r.stage) == ("timeout", "verify") and "ran past its 1 s limit" in r.reason


def test_an_interrupt_during_a_job_leaves_no_result_and_no_state(job_for, monkeypatch):
    d = job_for()

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Job, "verify", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Job(d).run()
    assert not (d / "result.json").exists() and not (d / "state.json").exists()


# --- verify: profile (a program that checks itself before it times) ---------------

SELF_CHECKING = {"verify": "profile", "profile": ["{build}/toy_bench", "--check", "-n", "{iterations}"]}


def test_a_self_checking_program_is_verified_and_measured_in_one_run(job_for):
    d = job_for(target=SELF_CHECKING)
    r = Job(d).run()
    assert r.status == "ok" and "verify" not in r.timings and not (d / "verify.log").exists()
    assert (d / "profile.log").read_text().count("$ ") == 1
    assert {m.kernel for m in r.measurements} == {"alpha_kernel", "beta_kernel"}


def test_a_self_checking_programs_failed_check_is_verify_failed_not_runtime_failed(job_for):
    d = job_for(alpha=96, target=SELF_CHECKING)
    r = Job(d).run()
    assert (r.status, r.stage) == ("verify_failed", "verify")
    assert "toy_bench exit 1 before its timed part" in r.reason and "ALPHA_BLOCK=96 computes wrong results" in r.reason
    assert r.log.endswith("profile.log") and r.measurements == ()


def test_a_self_checking_program_that_crashes_is_still_runtime_failed(job_for):
    r = Job(job_for(beta_x=3, target=SELF_CHECKING)).run()
    assert (r.status, r.stage) == ("runtime_failed", "profile") and "SIGABRT" in r.reason


def _checking_job(job_for, **space) -> Path:
    """A toy job whose timing program checks itself when given its check argument (--check)."""
    d = job_for(target={**SELF_CHECKING, "profile": ["{build}/toy_bench", "-n", "{iterations}"]}, **space)
    cfg = json.loads((d / "config.json").read_text())
    cfg["target"]["check_args"] = ["--check"]
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_a_self_checking_program_run_again_for_its_noise_checks_only_in_its_first_run(job_for):
    d = _checking_job(job_for, run={"iterations": 1, "stopping": {"when": "never"}})
    r = Job(d).run()
    commands = [line for line in (d / "profile.log").read_text().splitlines() if line.startswith("$ ")]
    assert r.status == "ok" and r.sampling.runs == len(commands) == 5
    assert "--check" in commands[0] and not any("--check" in c for c in commands[1:])


def test_check_args_join_the_timing_command_only_while_run_verify_is_on(job_for):
    d = _checking_job(job_for)
    assert Job(d).program()[-1] == "--check"
    cfg = json.loads((d / "config.json").read_text())
    cfg["run"]["verify"] = False
    (d / "config.json").write_text(json.dumps(cfg))
    assert "--check" not in Job(d).program()


def test_a_race_rerun_of_a_self_checking_job_times_it_without_checking_it_again(job_for, tmp_path):
    from sweep.node.process import Tools
    from sweep.node.race import rerun

    d = _checking_job(job_for)
    assert Job(d).program()[-1] == "--check"
    (again,) = rerun(d, tmp_path / "race" / d.name, Tools(), 60)     # one workload: the space's one run
    assert "--check" not in again.program() and again.program()[0] == Job(d).program()[0]


def test_the_gpu_is_held_for_verify_and_profile_only(job_for):
    r = Job(job_for()).run()
    gpu, verify, profile = (r.intervals[k] for k in ("gpu", "verify", "profile"))
    assert gpu[0] <= verify[0] <= profile[1] <= gpu[1]
    assert gpu[1] <= r.intervals["parse"][0] and r.intervals["build"][1] <= gpu[0]


# --- resource limits at build time ------------------------------------------------

@pytest.mark.slow
def test_a_kernel_ptxas_refuses_for_its_shared_memory_is_skipped_naming_amount_and_limit(write_space, tmp_path):
    from tests.conftest import DATA

    space = target.load(write_space(target={"dir": str(DATA / "resource_limits"), "verify": [],
                                            "profile": ["{build}/shared"]}, build={"make_targets": ["shared"]}))
    jc = render.job_config(space, None, "limits", "h", "abc123")
    d = render.write_job(render.render_job(space, jc, tmp_path / "jobs", tmp_path / "cache"))
    r = Job(d).run()
    assert (r.status, r.stage) == ("skipped", "build")
    assert r.reason.startswith("resource limit: shared memory per block 98304 bytes > 49152 bytes (")
    assert "uses too much shared data (0x18000 bytes, 0xc000 max)" in r.reason and "Error 255" not in r.reason
