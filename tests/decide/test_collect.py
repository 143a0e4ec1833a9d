"""Collecting result files into tables."""

from __future__ import annotations

import pandas as pd
import pytest

from sweep.decide import collect
from sweep.core.errors import SweepError


def test_tables_have_one_row_per_job_and_per_job_kernel_shape(toy_sweep):
    _, jobs, results, _ = toy_sweep
    c = collect.collect(jobs / "toy")
    sweep_rows = c.configs[c.configs["role"] == "sweep"]
    assert len(sweep_rows) == 20 and set(c.configs["role"]) == {"sweep", "baseline", "best"}
    assert sweep_rows["status"].value_counts().to_dict() == {"ok": 12, "verify_failed": 4, "skipped": 4}
    ok_tags = set(c.configs[c.configs["status"] == "ok"]["tag"])
    assert set(c.measurements["tag"]) == ok_tags
    assert len(c.measurements) == 2 * len(ok_tags)  # alpha and beta, one launch shape each
    row = c.measurements[(c.measurements["tag"] == "A128_B64x4") & (c.measurements["kernel"] == "alpha_kernel")].iloc[0]
    assert (row["ALPHA_BLOCK"], row["block"], row["iterations"], row["instances"]) == (128, "128x1x1", 7, 7)
    assert row["median_ns"] > 0 and row["total_std_ns"] > 0


def test_written_tables_round_trip_as_parquet_and_csv(toy_sweep):
    _, _, results, _ = toy_sweep
    loaded = collect.load_tables(results / "toy")
    csv = pd.read_csv(results / "toy" / "measurements.csv")
    assert len(loaded.measurements) == len(csv) and list(loaded.measurements.columns) == list(csv.columns)


def test_planned_jobs_without_results_are_pending(toy_sweep, tmp_path):
    import shutil

    _, jobs, _, _ = toy_sweep
    copy = tmp_path / "toy"
    shutil.copytree(jobs / "toy", copy, ignore=shutil.ignore_patterns("build"))
    (copy / "A64_B32x1" / "result.json").unlink()
    (copy / "A64_B32x4" / "result.json").unlink()
    (copy / "A64_B32x4" / "state.json").write_text("{}")
    c = collect.collect(copy)
    status = dict(zip(c.configs["tag"], c.configs["status"]))
    assert status["A64_B32x1"] == "pending" and status["A64_B32x4"] == "running"


def test_folder_that_is_not_a_sweep_names_the_command_to_run(tmp_path):
    with pytest.raises(SweepError, match="config-sweep run"):
        collect.collect(tmp_path)


def test_loading_tables_that_were_never_collected_says_so(tmp_path):
    with pytest.raises(SweepError, match="config-sweep collect"):
        collect.load_tables(tmp_path)


def test_picks_read_only_the_configurations_of_the_space_as_it_is_now(tmp_path, capsys):
    from tests.conftest import py_space_dict, run_py_sweep

    run_py_sweep(tmp_path, py_space_dict("stale"))
    narrowed = py_space_dict("stale", ALPHA_BLOCK={"tag": "A", "values": [64, 256], "default": 256,
                                                   "kernels": ["k_a"]})
    jobs, results, s = run_py_sweep(tmp_path, narrowed)
    assert s.best.config["ALPHA_BLOCK"] == 64                   # 128 was measured, but is no longer in the space
    assert "#define ALPHA_BLOCK 64" in (results / "stale" / "best" / "conf.cuh").read_text()
    assert set(collect.collect(jobs / "stale").configs["tag"]) >= {"A32", "A128"}   # still reported by status
    assert (jobs / "stale" / "A128" / "result.json").is_file()  # kept, untouched
    err = capsys.readouterr().err
    assert "[stale] 1/0" not in err and "[stale] 2/2 done" in err
    _, _, s = run_py_sweep(tmp_path, py_space_dict("stale"))    # the space grows back: reused, not rerun
    assert s.counts == {} and s.best.config["ALPHA_BLOCK"] == 128


def test_nothing_measured_points_at_failures_only_when_a_job_failed():
    from sweep.decide.collect import nothing_measured
    skipped = pd.DataFrame({"tag": ["a", "b"], "status": ["skipped", "skipped"]})
    assert "failures above" not in nothing_measured(skipped)
    assert "2 skipped" in nothing_measured(skipped)
    failed = pd.DataFrame({"tag": ["a", "b"], "status": ["skipped", "compile_failed"]})
    assert "see the failures above" in nothing_measured(failed)
    assert "no job was planned" in nothing_measured(pd.DataFrame())


def test_an_overlap_mode_results_gpu_use_and_context_mode_become_columns(toy_sweep, tmp_path):
    import json
    import shutil

    _, jobs, _, _ = toy_sweep
    copy = tmp_path / "toy"
    shutil.copytree(jobs / "toy", copy, ignore=shutil.ignore_patterns("build"))
    path = copy / "A128_B64x4" / "result.json"
    r = json.loads(path.read_text())
    r["env"].update(gpu_mode="overlap", gpu_contexts="gate", gpu_use={"busy_s": 0.4, "wait_s": 1.5, "outside": 0})
    path.write_text(json.dumps(r))
    rows = collect.collect(copy).configs.set_index("tag")
    assert rows.loc["A128_B64x4", ["gpu_mode", "gpu_contexts", "gpu_busy_s", "gpu_wait_s", "gpu_outside"]].tolist() \
        == ["overlap", "gate", 0.4, 1.5, 0]
    other = rows.loc["A64_B32x1"]          # an exclusive-mode result: no context mode, no waits
    assert other["gpu_mode"] == "exclusive" and pd.isna(other["gpu_contexts"]) and pd.isna(other["gpu_wait_s"])
