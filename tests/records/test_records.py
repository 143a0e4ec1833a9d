"""The contract between stages: each record round-trips through its file, and a file of
another schema version is refused with the command that rewrites it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.core.errors import SweepError
from sweep.profile import Measurement
from sweep.records import (FAILED, NOT_FAILED, Best, Candidate, Choice, Confirmation, Damaged, JobConfig, JobResult,
                           JobSettings, Manifest, Skip, Stale, Status, load_record, read_result, write_result)

DATA = Path(__file__).resolve().parents[1] / "data"


def _config() -> JobConfig:
    return JobConfig(sweep="s", tag="A64", macros={"A": 64}, config_hash="h1", space_path="/x/s.yaml", commit="c",
                     target={"name": "t", "source_dir": "/x", "verify": [], "profile": ["{build}/b"], "events": []},
                     build={"arch": ["sm_90"], "nvcc_flags": ["-O3"], "make_targets": ["all"], "jobs": 0},
                     run={"batch": 1, "seq_len": 1, "warmup": 1, "iterations": 3, "args": [], "verify": True},
                     profile={"backend": "events", "ncu_iterations": 3}, values={"weights": "/w"},
                     settings=JobSettings(nsys="/opt/nsys", timeout_s=60.0))


def _result() -> JobResult:
    m = Measurement("k", (2, 1, 1), (64, 1, 1), 1, 10.0, 9.0, 11.0, 10.0, 1.0, (10.0, 9.0, 11.0))
    return JobResult.ended(_config(), Status.OK, measurements=(m,), env={"gpu": "H100"})


def _best() -> Best:
    c = Candidate({"A": 64}, "A64", 10.0, 1.0, 1)
    return Best("s", (Choice(("A",), ("k",), {"A": 64}, c, None, None, None, False, candidates=(c,)),), {"A": 64})


def _manifest() -> Manifest:
    return Manifest("s", "/x/s.yaml", "grid", "events", "local", 2, "2", "c", "d", "2026-01-01T00:00:00+00:00",
                    tags=("A64",), skipped=(Skip("A2", "A > 8 is false", {"A": 2}),), runs=({"counts": {"ok": 1}},))


RECORDS = {
    "config": (_config, lambda d, p: JobConfig.from_dict(d, p), "render the job again"),
    "result": (_result, lambda d, p: JobResult.from_dict(d, p), "config-sweep clean"),
    "manifest": (_manifest, lambda d, p: Manifest.from_dict(d, p), "run the sweep again"),
    "best": (_best, lambda d, p: Best.from_dict(d, p), "config-sweep collect"),
    "confirmation": (lambda: Confirmation(1.0, 2.0, 3.0, speedup_vs_default=1.5),
                     lambda d, p: Confirmation.from_dict(d, p), "config-sweep collect"),
}


@pytest.mark.parametrize("kind", RECORDS)
def test_record_round_trips_through_its_file_with_its_schema(kind, tmp_path):
    make, read, _ = RECORDS[kind]
    record = make()
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(record.to_dict()))
    data = json.loads(path.read_text())
    assert data["schema"].startswith("sweep-")
    assert read(data, path) == record


@pytest.mark.parametrize("kind", RECORDS)
def test_record_of_another_version_is_refused_naming_the_file_and_the_rewrite_command(kind, tmp_path):
    make, read, rewrite = RECORDS[kind]
    data = make().to_dict()
    data["schema"] = data["schema"].rsplit("/", 1)[0] + "/0"
    path = tmp_path / f"{kind}.json"
    with pytest.raises(Stale, match=rewrite) as err:
        read(data, path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("kind", RECORDS)
def test_record_with_an_unknown_field_is_damaged_not_a_traceback(kind, tmp_path):
    make, read, _ = RECORDS[kind]
    data = make().to_dict() | {"surprise": 1}
    with pytest.raises(Damaged, match="surprise"):
        read(data, tmp_path / "x.json")


def test_status_is_one_enum_whose_sets_partition_it():
    assert {s.value for s in Status} == {"ok", "skipped", "compile_failed", "verify_failed", "runtime_failed", "timeout",
                                         "preempted", "cancelled", "pending", "running", "built"}
    assert FAILED | NOT_FAILED == set(Status) and not FAILED & NOT_FAILED
    assert "ok" in NOT_FAILED and "timeout" in FAILED and Status("verify_failed").failed


def test_ended_adds_the_previous_attempt_of_the_same_configuration_to_the_history():
    first = JobResult.ended(_config(), "runtime_failed", "profile", "crashed")
    second = JobResult.ended(_config(), "ok", previous=first)
    assert second.attempt == 2 and second.history == ({"status": "runtime_failed", "stage": "profile",
                                                       "reason": "crashed"},)
    other = JobResult.ended(_config(), "ok", previous=JobResult.ended(
        JobConfig.from_dict(_config().to_dict() | {"config_hash": "h2"}), "ok"))
    assert other.attempt == 1 and other.history == ()


def test_a_wrongly_shaped_result_is_moved_aside_and_the_configuration_counts_as_unmeasured(tmp_path, capsys):
    (tmp_path / "result.json").write_text(json.dumps({"schema": "sweep-result/1", "tag": 3}))
    assert read_result(tmp_path) is None
    aside = list(tmp_path.glob("result.json.bad-*"))
    assert len(aside) == 1 and json.loads(aside[0].read_text())["tag"] == 3   # kept, not deleted
    assert "moved it aside" in capsys.readouterr().err
    write_result(tmp_path, _result())
    assert read_result(tmp_path) == _result().__class__.from_dict(json.loads((tmp_path / "result.json").read_text()))


def test_the_committed_h100_results_read_as_records():
    for d in (p for p in (DATA / "h100_sweep").iterdir() if p.is_dir()):
        best = load_record(Best, d / "best.json")
        conf = load_record(Confirmation, d / "confirmation.json")
        manifest = Manifest.from_dict(json.loads((d / "manifest.json").read_text()))
        assert best.choices and conf.sum_of_group_bests_ns and manifest.sweep == d.name


def test_a_job_config_without_settings_gets_the_defaults_but_a_missing_field_is_refused(tmp_path):
    d = _config().to_dict()
    del d["settings"]
    assert JobConfig.from_dict(d).settings == JobSettings()
    del d["tag"]
    with pytest.raises(SweepError, match="not a valid JobConfig"):
        JobConfig.from_dict(d, tmp_path / "config.json")


def test_a_choice_round_trips_its_evidence_certification_and_shapes(tmp_path):
    from sweep.records.evidence import Certification, ShapeBest

    c = Candidate({"A": 64}, "A64", 10.0, 1.0, 1, samples=5, iqr_ns=0.5, threads=64, node="GPU-1")
    cert = Certification("tie", {"A": 64}, "default in tied set", tied=({"A": 64}, {"A": 128}), runner_up={"A": 128},
                         margin=0.01, ci_low=-0.02, ci_high=None, rounds=30, stopped="budget",
                         entrants=({"tag": "A64", "values": {"A": 64}, "threads": 64, "is_default": True,
                                    "median_ns": 10.0},), host="n1", leader="A128",
                         comparisons={"A64": {"margin": 0.01, "ci_low": -0.02, "ci_high": None, "verdict": "tie"}})
    choice = Choice(("A",), ("k",), {"A": 64}, c, c, 0.01, 0.3, False, candidates=(c,), noise_source="race",
                    verdict="tie", margin_ci_low=-0.02, confidence=0.99, certification=cert,
                    shapes=(ShapeBest("k", 0, "grid 2x1x1 block 64x1x1", {"A": 64}, 10.0, 10.0, 0.0),), nodes=("a", "b"))
    best = Best("s", (choice,), {"A": 64})
    data = json.loads(json.dumps(best.to_dict()))
    assert data["schema"] == "sweep-best/4" and Best.from_dict(data, tmp_path / "best.json") == best
    assert cert.verdict == "tie" and not choice.certified


def test_a_result_of_schema_1_reads_as_one_run_without_sampling(tmp_path):
    d = _result().to_dict() | {"schema": "sweep-result/1"}
    del d["sampling"]
    r = JobResult.from_dict(d, tmp_path / "result.json")
    assert r.sampling is None and r.schema == "sweep-result/2" and r.measurements == _result().measurements
