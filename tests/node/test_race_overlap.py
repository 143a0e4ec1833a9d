"""The certification race in overlap mode (no GPU): a round of whole runs taken at once, each
program holding the GPU only around its GPU work (sweep/node/race_runs.py), and what such a
race is estimated to cost (sweep/decide/race_cost.py): its runs' waves or their GPU work in a
row, whichever is longer, instead of every run one after another."""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

from sweep.decide import race_cost
from sweep.decide.collect import Collected
from sweep.node import race
from sweep.node.race_runs import concurrent_runs
from sweep.stats import Entrant


def counting_runs(seconds: float, sample) -> tuple:
    """A run that takes `seconds` and returns sample(tag), and the most runs that were running at once."""
    running, most, lock = [0], [0], threading.Lock()

    def run(tag: str) -> list:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(seconds)
        with lock:
            running[0] -= 1
        return sample(tag)

    return run, most


def test_a_rounds_runs_start_together_and_each_job_keeps_its_own_sample():
    run, most = counting_runs(0.2, lambda tag: [tag])
    read = concurrent_runs(run, workers=4)(["A", "B", "C"], 0, 1)
    assert most[0] == 3 and read() == {"A": ["A"], "B": ["B"], "C": ["C"]}


def test_no_more_runs_than_workers_run_at_once():
    run, most = counting_runs(0.05, lambda tag: [])
    concurrent_runs(run, workers=2)(list("ABCDE"), 1, 1)
    assert most[0] == 2


def test_a_failed_run_ends_the_round_with_its_error():
    def run(tag: str) -> list:
        if tag == "B":
            raise RuntimeError("B crashed")
        return []

    with pytest.raises(RuntimeError, match="B crashed"):
        concurrent_runs(run, workers=3)(list("ABC"), 0, 1)


def test_a_run_out_of_gpu_memory_beside_the_round_runs_again_alone_and_keeps_its_sample():
    from sweep.node.process import JobFailed
    from sweep.records import Status

    alone_ran = []

    def run(tag: str) -> list:
        if tag == "B":
            raise JobFailed(Status.RUNTIME_FAILED, "profile", "prog exit 2: cudaMalloc: out of memory")
        return [tag]

    def alone(tag: str) -> list:
        alone_ran.append(tag)
        return [f"{tag} alone"]

    read = concurrent_runs(run, workers=3, alone=alone)(["A", "B", "C"], 0, 1)
    assert read() == {"A": ["A"], "B": ["B alone"], "C": ["C"]} and alone_ran == ["B"]


def test_a_race_records_the_runs_it_took_again_alone():
    g = race.GpuRace.__new__(race.GpuRace)
    g.runs, g.throttled_runs, g.alone = 3, 0, ["P2"]
    summary = g.summary()
    assert summary["alone_runs"] == 1 and "P2" in summary["alone_note"]
    g.alone = []
    assert "alone_runs" not in g.summary()


def plan(overlap: bool) -> race.RacePlan:
    entrants = tuple(Entrant(t, 32, i == 0) for i, t in enumerate(["P1", "P2", "P3"]))
    lane = race.Lane(("P",), ("k",), entrants, {e.id: {"P": i} for i, e in enumerate(entrants)})
    return race.RacePlan((lane,), {e.id: f"/jobs/{e.id}" for e in entrants}, {}, 60.0, 30, overlap=overlap)


def host_heavy(busy_s: float | None) -> Collected:
    """Four configurations whose profiled run takes 4.3 s, `busy_s` of it GPU work."""
    tags = ["P1", "P2", "P3", "P4"]
    cf = pd.DataFrame({"tag": tags, "role": "sweep", "status": "ok", "profile_s": 4.3, "runs": 1, "backend": "cupti",
                       "gpu_busy_s": busy_s, "config_hash": tags})
    return Collected(cf, pd.DataFrame(), None)


def test_an_overlap_race_of_host_heavy_programs_costs_a_wave_of_runs_a_round_not_every_run():
    first = race_cost.first_certifiable_round(3, 30)
    exclusive = race_cost.cost_s(plan(False), host_heavy(0.8), 3)
    shared = race_cost.cost_s(plan(True), host_heavy(0.8), 3)
    assert exclusive == pytest.approx(first * 3 * 4.3)
    assert shared == pytest.approx(first * 4.3)          # three runs in one wave: 4.3 s > 3 x 0.8 s of GPU work
    assert race_cost.cost_s(plan(True), host_heavy(2.0), 3) == pytest.approx(first * 3 * 2.0)   # the GPU's work bounds it


def test_without_gpu_busy_figures_an_overlap_race_is_estimated_as_runs_in_a_row():
    assert race_cost.cost_s(plan(True), host_heavy(None), 3) == race_cost.cost_s(plan(False), host_heavy(None), 3)


def test_a_plan_keeps_its_overlap_setting_and_one_without_it_keeps_its_digest():
    on, off = plan(True), plan(False)
    assert race.RacePlan.from_dict(on.to_dict()).overlap is True
    assert "overlap" not in off.to_dict() and on.digest() != off.digest()
