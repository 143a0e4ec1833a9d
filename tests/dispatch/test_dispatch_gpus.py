"""Every GPU busy (sweep.dispatch.local, workers, occupancy): jobs go to whichever GPU frees first,
no GPU ever measures two jobs at once, and the finishing stages run side by side on different GPUs.
CPU only: the py target with fake GPUs (CUDA_VISIBLE_DEVICES=0,1), whose program sleeps
PY_BENCH_SLEEP_MS(_GPU<n>) and names the GPU it was given as its device."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from sweep.dispatch.local import build_parallel, gpu_cost_s, workers_per_gpu
from sweep.dispatch.occupancy import Occupancy
from sweep.node import gpus
from sweep.pipeline import driver as pipeline
from tests.conftest import py_space_dict


def _run(root: Path, space: dict, monkeypatch, **options):
    """The py space through the local executor on fake GPUs 0 and 1 (no compiler needed)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(root / "locks"))     # this test's GPUs alone
    monkeypatch.setattr(gpus, "uuids_by_index", lambda *a, **k: {})
    if shutil.which("nvcc") is None:   # the preflight asks for one; this target never calls it
        (root / "_bin").mkdir(exist_ok=True)
        (root / "_bin" / "nvcc").write_text("#!/bin/sh\nexit 1\n")
        (root / "_bin" / "nvcc").chmod(0o755)
        monkeypatch.setenv("PATH", f"{root / '_bin'}{os.pathsep}{os.environ['PATH']}")
    path = root / f"{space['name']}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    opts = {"confirm": False, "report": False, **options}
    return pipeline.run(path, pipeline.Options(executor="local", jobs_root=root / "jobs", results_root=root / "results",
                                               poll_s=0.02, **opts))


def _measured(jobs: Path, name: str) -> list[dict]:
    out = []
    for f in sorted((jobs / name).glob("*/result.json")):
        r = json.loads(f.read_text())
        if r["status"] == "ok" and "gpu" in r.get("intervals", {}):
            out.append(r)
    return out


def _overlap(x, y) -> bool:
    return x[0] < y[1] and y[0] < x[1]


def test_jobs_go_to_the_gpu_that_frees_first_and_no_gpu_measures_two_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PY_BENCH_SLEEP_MS_GPU1", "900")    # GPU 1 slow, GPU 0 fast
    monkeypatch.setenv("PY_BENCH_SLEEP_MS_GPU0", "20")
    space = py_space_dict("free", ALPHA_BLOCK={"tag": "A", "values": [32, 48, 64, 96, 128, 160, 192, 256], "default": 256,
                                               "kernels": ["k_a"]})
    s = _run(tmp_path, space, monkeypatch)
    assert s.counts == {"ok": 8}
    runs = _measured(tmp_path / "jobs", "free")
    on = [r["env"]["gpu_uuid"] for r in runs]
    assert on.count("toy-GPU-0") > on.count("toy-GPU-1") >= 1, on     # the fast GPU takes more of the queue
    spans = [(r["env"]["gpu_uuid"], r["intervals"]["gpu"]) for r in runs]
    for i, (g, a) in enumerate(spans):
        assert not any(_overlap(a, b) for h, b in spans[i + 1:] if h == g), "a GPU measured two jobs at once"
    # the run's record keeps each GPU's share of the measuring phase
    run = json.loads((tmp_path / "jobs" / "free" / "sweep.json").read_text())["runs"][-1]
    shares = run["gpu_occupancy"]["gpus"]
    assert set(shares) == {"0", "1"} and sum(v["jobs"] for v in shares.values()) == 8
    held = sum(r["intervals"]["gpu"][1] - r["intervals"]["gpu"][0] for r in runs if r["env"]["gpu_uuid"] == "toy-GPU-1")
    assert shares["1"]["busy_s"] == pytest.approx(held, abs=0.01)
    assert shares["1"]["share"] == pytest.approx(held / run["gpu_occupancy"]["measuring_s"], abs=0.01)


def test_the_hand_over_log_says_when_each_job_was_built_handed_to_a_worker_taken_up_and_ended(tmp_path, monkeypatch):
    monkeypatch.setenv("PY_BENCH_SLEEP_MS", "50")
    space = py_space_dict("hand", ALPHA_BLOCK={"tag": "A", "values": [32, 64, 128], "default": 256, "kernels": ["k_a"]})
    assert _run(tmp_path, space, monkeypatch).counts == {"ok": 3}
    log = tmp_path / "jobs" / "hand" / "_dispatch" / "handover.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    workers = [x for x in lines if x.get("event") == "workers"]
    assert workers and workers[0]["from"] <= workers[0]["to"] and workers[0]["workers"] >= 2
    jobs = {x["tag"]: x for x in lines if "tag" in x}
    runs = {r["tag"]: r for r in _measured(tmp_path / "jobs", "hand")}
    assert set(jobs) == set(runs) and len(runs) == 3
    for tag, x in jobs.items():
        assert x["worker_started"] <= x["received"] and x["ready"] <= x["sent"] <= x["received"] <= x["admitted"]
        held = runs[tag]["intervals"]["gpu"]
        assert x["admitted"] <= held[0] <= held[1] <= x["ended"] and x["gpu"] in ("0", "1")


def test_workers_start_after_the_first_builds_were_handed_out_a_few_a_look(tmp_path, monkeypatch):
    """Starting every worker first (72 for four GPUs) delayed the first builds by seconds."""
    from sweep.dispatch import local
    seen: list[int] = []
    spawn = local.LocalExecutor._spawn

    def counting(self, offer, folder):
        seen.append(self.builds_started)
        return spawn(self, offer, folder)
    monkeypatch.setattr(local.LocalExecutor, "_spawn", counting)
    monkeypatch.setattr(local, "SPAWN_BATCH", 2)
    monkeypatch.setenv("PY_BENCH_SLEEP_MS", "50")
    space = py_space_dict("late", ALPHA_BLOCK={"tag": "A", "values": [32, 64, 128, 256], "default": 256,
                                               "kernels": ["k_a"]})
    assert _run(tmp_path, space, monkeypatch).counts == {"ok": 4}
    assert seen and seen[0] >= 1, seen           # the first look's builds went out before any worker started
    assert seen == sorted(seen)


def test_two_jobs_handed_over_together_measure_on_two_gpus_at_once(tmp_path, monkeypatch):
    """What the finishing stage relies on: the baseline and the combined best, dispatched together,
    run side by side on different GPUs (slot 0 of every GPU is tried before slot 1 of any)."""
    monkeypatch.setenv("PY_BENCH_SLEEP_MS", "700")
    space = py_space_dict("pair", ALPHA_BLOCK={"tag": "A", "values": [64, 128], "default": 256, "kernels": ["k_a"]})
    s = _run(tmp_path, space, monkeypatch)
    assert s.counts == {"ok": 2}
    (a, b) = _measured(tmp_path / "jobs", "pair")
    assert a["env"]["gpu_uuid"] != b["env"]["gpu_uuid"]
    assert _overlap(a["intervals"]["gpu"], b["intervals"]["gpu"])


def test_a_job_measured_in_overlap_mode_costs_its_gpu_the_token_time_of_its_runs_not_its_interval():
    from sweep.records import JobResult
    from sweep.records.evidence import Sampled

    def job(mode: str, held_s: float | None, runs: int) -> JobResult:
        use = {"busy_s": 0.2} | ({"held_s": held_s} if held_s is not None else {})
        return JobResult(sweep="s", tag="t", config_hash="h", macros={}, status="ok",
                         env={"gpu_mode": mode, "gpu_use": use}, intervals={"gpu": [100.0, 104.0]},
                         sampling=Sampled(runs=runs, samples=runs, source="runs"))

    assert gpu_cost_s(job("overlap", 0.25, 5)) == pytest.approx(1.25)   # five runs' token windows
    assert gpu_cost_s(job("exclusive", 0.25, 5)) == pytest.approx(4.0)  # held the GPU the whole interval
    assert gpu_cost_s(job("overlap", None, 5)) == pytest.approx(4.0)    # no token record: the interval
    assert gpu_cost_s(JobResult(sweep="s", tag="t", config_hash="h", macros={}, status="compile_failed")) is None


def test_build_parallelism_keeps_the_gpus_fed_from_measured_build_and_measure_times():
    assert build_parallel(16, 4, [], []) == 16                     # nothing measured yet: every CPU builds
    assert build_parallel(16, 4, [6.0], []) == 16
    assert build_parallel(16, 4, [6.0], [1.0]) == 16               # 4 GPUs x 6 s builds / 1 s runs: all the CPUs
    assert build_parallel(16, 2, [1.0, 1.0], [2.0]) == 4           # cached builds: the floor
    assert build_parallel(16, 4, [4.0], [2.0]) == 10               # 1.25 x 4 x 4 / 2
    assert workers_per_gpu(1) == 3 and workers_per_gpu(8) == 10    # the slots, one staged at the lock, a spare


def test_occupancy_is_each_gpus_held_time_over_the_measuring_phase():
    occ = Occupancy(["0", "1"])
    occ.start = 100.0
    occ.ended("0", {"gpu": [100.0, 108.0]}, at=109.0)
    occ.ended("0", {"gpu": [108.5, 110.0]}, at=110.0)
    occ.ended("1", {"race": [99.0, 105.0]}, at=110.0)        # before the phase: only its part inside counts
    assert occ.shares() == pytest.approx({"0": 0.95, "1": 0.5})
    assert occ.summary()["gpus"]["0"] == {"share": 0.95, "busy_s": 9.5, "jobs": 2}


def _gpus_named(folder: Path) -> set[str]:
    """The GPUs the programs under `folder` were given (the py target names it as its device)."""
    return {json.loads(f.read_text())["device"]["uuid"] for f in folder.glob("**/events.json")}


def test_each_groups_race_runs_on_a_gpu_of_its_own_side_by_side_and_the_confirmations_on_two_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("PY_BENCH_SLEEP_MS", "30")
    space = py_space_dict("race", ALPHA_BLOCK={"tag": "A", "values": [64, 128], "default": 64, "kernels": ["k_a"]},
                          BETA={"tag": "B", "values": [2, 4], "default": 2, "kernels": ["k_b"]})
    space["certify"] = {"combine": False, "lockstep": False, "top": 2, "budget_s": 30}
    s = _run(tmp_path, space, monkeypatch, confirm=True)
    assert s.counts == {"ok": 4}
    sweep = tmp_path / "jobs" / "race"
    races = sorted(f.parent for f in (sweep / "_races").glob("*/race.json"))
    assert len(races) == 2, "one race a group"
    on = [_gpus_named(d) for d in races]
    assert all(len(g) == 1 for g in on) and on[0] != on[1]      # a race on one GPU; the two on two GPUs
    spans = [json.loads((d / "result.json").read_text())["intervals"]["race"] for d in races]
    assert _overlap(*spans)                                     # side by side
    assert {tuple(json.loads((d / "race_plan.json").read_text())["lanes"][0]["macros"]) for d in races} == \
        {("ALPHA_BLOCK",), ("BETA",)}
    assert {c.macros: c.certification is not None for c in s.best.choices} == {("ALPHA_BLOCK",): True, ("BETA",): True}
    confirm = [json.loads((sweep / t / "result.json").read_text()) for t in ("default", "best")]
    assert confirm[0]["env"]["gpu_uuid"] != confirm[1]["env"]["gpu_uuid"]
    assert _overlap(confirm[0]["intervals"]["gpu"], confirm[1]["intervals"]["gpu"])


def test_the_strategy_is_asked_again_as_each_job_ends_not_when_a_batch_has(tmp_path, monkeypatch):
    from sweep.dispatch import local

    asked: list[tuple[int, int]] = []      # (n asked for, jobs ended by then)
    ended = []
    real_stream = local.LocalExecutor.stream

    def stream(self, ask, stages, on_result, progress):
        def counting(n):
            asked.append((n, len(ended)))
            return ask(n)

        def told(r):
            ended.append(r.tag)
            on_result(r)
        return real_stream(self, counting, stages, told, progress)

    monkeypatch.setattr(local.LocalExecutor, "stream", stream)
    monkeypatch.setattr(local.LocalExecutor, "parallelism", lambda self: 2)
    # GPU 1's jobs take 3 s, GPU 0's none: while GPU 1 holds its first job, GPU 0 ends one after another,
    # and an adaptive strategy (asked for n, it gives n) must be asked for one more as each of them ends
    monkeypatch.setenv("PY_BENCH_SLEEP_MS_GPU0", "0")
    monkeypatch.setenv("PY_BENCH_SLEEP_MS_GPU1", "3000")
    space = py_space_dict("ask", ALPHA_BLOCK={"tag": "A", "values": [32, 48, 64, 96, 128, 256], "default": 256,
                                              "kernels": ["k_a"]})
    space["strategy"] = {"name": "learning", "budget": 6}
    s = _run(tmp_path, space, monkeypatch)
    assert s.counts == {"ok": 6}
    assert asked[0] == (2, 0)
    top_ups = [(n, done) for n, done in asked[1:] if done < 6]
    assert top_ups[:2] == [(1, 1), (1, 2)], asked   # one more as each ends, while GPU 1's job runs


def test_a_debug_job_measures_under_the_node_wide_lock_of_its_gpu(tmp_path, monkeypatch):
    from tests.conftest import run_py_sweep

    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(gpus, "uuids_by_index", lambda *a, **k: {})
    taken = []
    real = gpus.gpu_lock.__enter__

    def enter(self):
        taken.append(self.path)
        return real(self)
    monkeypatch.setattr(gpus.gpu_lock, "__enter__", enter)
    _, _, s = run_py_sweep(tmp_path, py_space_dict("dbg", ALPHA_BLOCK={"tag": "A", "values": [64, 128], "default": 128,
                                                                    "kernels": ["k_a"]}))
    assert s.counts == {"ok": 2}
    assert [str(p) for p in taken] == [str(tmp_path / "locks" / "gpu0.lock")] * 2


def test_a_slurm_job_measures_under_the_node_wide_lock_of_the_gpu_slurm_gave_it(tmp_path, monkeypatch, capsys):
    from sweep.dispatch import slurm_submit

    seen = []
    monkeypatch.setattr(slurm_submit, "run_job", lambda d, stages, gpu_lock_path=None: seen.append(gpu_lock_path)
                        or {"status": "ok"})
    monkeypatch.setattr(slurm_submit.Termination, "watch", lambda: None)
    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f3a2b1c-0000")
    task = slurm_submit.SweepTask(time_min=10)
    task("jobdir", "measure")
    task("jobdir", "build")                              # a build takes no GPU lock
    assert seen == [str(tmp_path / "locks" / "GPU-8f3a2b1c-0000.lock"), None]
    # a node whose lock folder cannot be used: measured without it, and the job's log says so
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(tmp_path / "file" / "locks"))
    task("jobdir", "measure")
    assert seen[-1] is None and "measuring without the node's GPU lock" in capsys.readouterr().err
