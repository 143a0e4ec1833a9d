"""bench/scaling.py and its readers (bench/sweep_times.py): refuses to run without a GPU in one
line, splits a run's wall time by the jobs' own intervals (sweep jobs' builds and GPU holds, races,
confirmations, the rest), reads the hand-over log, and sets variants side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.scaling import agreement_line, agreements, carry_warm, merged, parse_variant, table  # noqa: E402
from bench.sweep_times import gpu_work_s, handover, handover_line, split, timeline  # noqa: E402


def test_without_a_gpu_it_says_so_in_one_line_and_exits_1():
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "scaling.py")], capture_output=True, text=True,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=120)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.strip().splitlines() == ["bench/scaling.py needs a GPU: nvidia-smi finds none here (or "
                                             "CUDA_VISIBLE_DEVICES is empty); run it on a GPU node"]


def _result(folder: Path, intervals: dict, role: str = "sweep") -> None:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"intervals": intervals, "role": role}))


def test_the_wall_time_splits_into_build_measure_race_confirm_and_what_none_covers(tmp_path):
    _result(tmp_path / "A1", {"build": [0, 2], "gpu": [2, 5], "parse": [5, 6]})
    _result(tmp_path / "A2", {"build": [1, 3], "gpu": [5, 8]})             # built while A1 measured
    _result(tmp_path / "_races" / "abc", {"race": [9, 12]}, role="race")
    _result(tmp_path / "best", {"build": [12, 12.5], "gpu": [12.5, 13]}, role="best")
    assert split(tmp_path, 0, 15) == {"build": 3.0, "measure": 6.0, "race": 3.0, "confirm": 1.0, "framework": 3.0}


def test_a_reported_run_forgets_what_an_earlier_one_under_its_name_measured_and_a_cold_one_the_object_cache(tmp_path):
    from bench.scaling import fresh
    for folder in ("jobs/q-g1-warm/T1", "results/q-g1-warm", "jobs/q-g1-warmup/T1", "jobs/_cache/objects/ab",
                   "jobs/_cache/cupti"):
        (tmp_path / folder).mkdir(parents=True)
    fresh(tmp_path, "q-g1-warm", cold=False)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/*"))
    assert left == ["jobs/_cache", "jobs/q-g1-warmup"]
    assert (tmp_path / "jobs/_cache/objects/ab").is_dir()
    fresh(tmp_path, "q-g1-cold", cold=True)
    assert not (tmp_path / "jobs/_cache/objects").exists() and (tmp_path / "jobs/_cache/cupti").is_dir()


def test_the_gpu_work_is_the_sweep_jobs_busy_seconds_times_their_runs_and_unknown_without_cupti(tmp_path):
    for name, busy, runs, role in (("A", 0.25, 5, "sweep"), ("B", 0.5, 1, "sweep"), ("best", 9.0, 1, "best")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(
            {"role": role, "env": {"gpu_use": {"busy_s": busy}}, "sampling": {"runs": runs}}))
    assert gpu_work_s(tmp_path) == 1.75                      # the confirmation's run is not the sweep's
    _result(tmp_path / "nsys" / "C", {"gpu": [0, 1]})
    assert gpu_work_s(tmp_path / "nsys") is None


def test_runs_of_an_earlier_command_are_kept_unless_replaced_and_speedups_are_over_one_gpu():
    from bench.scaling import merged

    def run(gpus, wall, race=0.0):
        return {"gpus": gpus, "cache": "warm", "wall_s": wall, "split": {"race": race}}
    out = merged([run(1, 100.0, 20.0), run(2, 80.0, 20.0)], [run(2, 60.0, 20.0), run(4, 40.0, 20.0)])
    assert [(r["gpus"], r["wall_s"]) for r in out] == [(1, 100.0), (2, 60.0), (4, 40.0)]
    assert [r["speedup"] for r in out] == [1.0, 1.667, 2.5]
    assert [r["speedup_without_race"] for r in out] == [1.0, 2.0, 4.0]


def test_the_timeline_keeps_every_jobs_intervals_from_the_runs_start(tmp_path):
    _result(tmp_path / "A1", {"build": [100, 102], "gpu": [102, 105]})
    _result(tmp_path / "_races" / "abc", {"race": [109, 112]}, role="race")
    got = {t["tag"] or t["role"]: t for t in timeline(tmp_path, 100.0)}
    assert got["sweep"]["intervals"] == {"build": [0.0, 2.0], "gpu": [2.0, 5.0]}
    assert got["race"]["intervals"] == {"race": [9.0, 12.0]} and got["race"]["busy_s"] is None


def test_a_warm_run_of_another_gpu_count_gets_the_caches_and_the_exported_weights_not_the_sweeps(tmp_path):
    src, dst = tmp_path / "gpus1" / "jobs", tmp_path / "gpus2" / "jobs"
    for f in ("_cache/objects/ab/obj.o", "_cache/cupti/libsweep_cupti.so", "_models/124M-seed0/weights.bin",
              "quick-check-g1-warm/B128/result.json"):
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_text(f)
    carry_warm(src, dst)
    assert (dst / "_cache/objects/ab/obj.o").read_text() == "_cache/objects/ab/obj.o"
    assert (dst / "_cache/cupti/libsweep_cupti.so").is_file()      # else each job's build stage waits for nvcc
    assert (dst / "_models/124M-seed0/weights.bin").is_file()
    assert not (dst / "quick-check-g1-warm").exists()


def test_a_variant_is_a_name_with_optional_variables_and_a_malformed_one_is_refused_in_one_line():
    assert parse_variant("default") == ("default", {})
    assert parse_variant("gate:SWEEP_GPU_TOKEN_CONTEXT=gate,X_Y=") == ("gate", {"SWEEP_GPU_TOKEN_CONTEXT": "gate",
                                                                            "X_Y": ""})
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "scaling.py"), "--variant", "gate:lower=1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.strip().splitlines() == ["bench/scaling.py: --variant 'gate:lower=1': give NAME or "
                                             "NAME:VAR=VALUE[,VAR=VALUE...], e.g. gate:SWEEP_GPU_TOKEN_CONTEXT=gate"]


def _variant_run(variant, gpus, wall, results=""):
    return {"variant": variant, "gpus": gpus, "cache": "warm", "wall_s": wall, "results": results,
            "split": {"build": 1.0, "measure": 2.0, "race": 0.0, "confirm": 0.5, "framework": 0.5},
            "measuring_s": 2.0, "occupancy": 1.0, "gpu_work": 0.5, "per_gpu": {"0": 1.0}}


def test_each_variants_speedup_is_over_one_gpu_of_the_same_variant_and_the_table_names_it():
    out = merged([], [_variant_run("default", 1, 30.0), _variant_run("gate", 1, 20.0),
                      _variant_run("default", 4, 15.0), _variant_run("gate", 4, 5.0)])
    assert [(r["variant"], r["gpus"], r["speedup"]) for r in out] == [("default", 1, 1.0), ("gate", 1, 1.0),
                                                                      ("default", 4, 2.0), ("gate", 4, 4.0)]
    lines = table(out).splitlines()
    assert lines[0].startswith("variant GPUs") and lines[4].startswith("gate       4  warm     5.0")


def _results(folder: Path, medians: list[float], pick: int) -> Path:
    folder.mkdir(parents=True)
    rows = ["T,kernel,grid,block,median_ns,noise,status,role"]
    rows += [f"{32 * (i + 1)},k,[4 4 1],[32 1 1],{m},0.002,ok,sweep" for i, m in enumerate(medians)]
    (folder / "measurements.csv").write_text("\n".join(rows) + "\n")
    (folder / "best.json").write_text(json.dumps({"config": {"T": pick}}))
    return folder


def test_a_later_variants_medians_and_picks_are_set_against_the_first_variants_at_the_same_count(tmp_path):
    a = _results(tmp_path / "default", [1000.0, 2000.0, 3000.0], 32)
    b = _results(tmp_path / "gate", [1005.0, 2100.0, 3000.0], 32)
    runs = [_variant_run("default", 1, 30.0, str(a)), _variant_run("gate", 1, 20.0, str(b)),
            _variant_run("gate", 4, 5.0, str(b))]          # no default run at 4 GPUs: nothing to set it against
    [g] = agreements(runs)
    assert (g["variant"], g["against"], g["gpus"], g["pairs"], g["same"]) == ("gate", "default", 1, 3, 2)
    assert g["picks"]["same"] and round(g["rel_max_abs"], 3) == 0.05
    assert agreement_line(g) == ("gate against default, 1 GPU(s) warm: per-launch medians within max(1%, noise) 2 of 3 "
                                 "(median +0.50%, largest 5.00%); picks the same")


def test_the_hand_over_log_adds_each_sweep_jobs_wait_for_the_driver_and_for_its_worker(tmp_path):
    folder = tmp_path / "A1"
    folder.mkdir()
    intervals = {"build": [100, 102], "gpu": [104, 105]}
    (folder / "result.json").write_text(json.dumps({"tag": "A1", "intervals": intervals}))
    (tmp_path / "_dispatch").mkdir()
    (tmp_path / "_dispatch" / "handover.jsonl").write_text(
        json.dumps({"event": "workers", "from": 100.5, "to": 101.0, "workers": 18}) + "\n"
        + json.dumps({"tag": "A1", "gpu": "0", "ready": 102.1, "sent": 103.0, "received": 103.9, "admitted": 104.0,
                      "ended": 105.1, "worker_started": 100.6, "worker_jobs_before": 0}) + "\n")
    h = handover(tmp_path, 100.0)
    assert h["workers"] == [0.5, 1.0] and h["jobs"]["A1"]["first_of_worker"]
    [job] = timeline(tmp_path, 100.0)
    assert job["intervals"]["waiting"] == [2.1, 3.0] and job["intervals"]["handover"] == [3.0, 3.9]
    assert handover_line({"handover": h}) == ("built to handed over: median 0.90 s, max 0.90 s; handed over to taken "
                                              "up: median 0.90 s, max 0.90 s (1 job); workers started from 0.5 s "
                                              "to 1.0 s")
    assert handover_line({"handover": handover(tmp_path / "none", 0.0)}) == "hand-over: unknown (no hand-over log)"


def test_each_race_is_read_with_its_budget_rounds_and_why_its_groups_stopped_in_start_order(tmp_path):
    from bench.sweep_times import race_line, races
    from sweep.node.race import OUTCOME_SCHEMA

    for name, start, stopped, lockstep in (("bbb", 5.0, ["budget", "budget"], True), ("aaa", 3.0, ["separated"], False)):
        _result(tmp_path / "_races" / name, {"race": [start, start + 36]}, role="race")
        plan = {"lanes": [{}] * len(stopped), "jobs": {"A": "/a", "B": "/b", "C": "/c"}, "budget_s": 36.0,
                **({"lockstep": True} if lockstep else {})}
        (tmp_path / "_races" / name / "race_plan.json").write_text(json.dumps(plan))
        (tmp_path / "_races" / name / "race.json").write_text(json.dumps(
            {"schema": OUTCOME_SCHEMA, "rounds": 9, "elapsed_s": 35.5,
             "lanes": [{"result": {"stopped": s}} for s in stopped]}))
    (tmp_path / "_races" / "ccc").mkdir()                       # a race that left nothing: not read
    got = races(tmp_path)
    assert [r["race"] for r in got] == ["aaa", "bbb"]
    assert race_line(got[1]) == ("race bbb: 2 group(s), 3 jobs a round in lockstep, budget 36.0 s, 9 rounds in 35.5 s; "
                                 "stopped: budget, budget")
