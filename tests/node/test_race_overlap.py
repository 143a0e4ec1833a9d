"""The certification race in overlap mode (no GPU): a round of whole runs taken at once, each
program holding the GPU only around its GPU work (sweep/node/race_runs.py), and what such a
race is estimated to cost (sweep/decide/race_cost.py): its runs' waves or their GPU work in a
row, whichever is longer, instead of every run one after another."""

from __future__ import annotations

import dataclasses
import threading
import time

import pandas as pd
import pytest

from sweep.decide import race_cost
from sweep.decide.collect import Collected
from sweep.node import race
from sweep.node.race_runs import ConcurrentRuns
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
    read = ConcurrentRuns(run, workers=4)(["A", "B", "C"], 0, 1)
    assert most[0] == 3 and read() == {"A": ["A"], "B": ["B"], "C": ["C"]}


def test_no_more_runs_than_workers_run_at_once():
    run, most = counting_runs(0.05, lambda tag: [])
    with ConcurrentRuns(run, workers=2) as rounds:
        rounds(list("ABCDE"), 1, 1)()
    assert most[0] == 2


def test_the_rounds_taken_before_a_read_run_together_and_each_read_gives_its_own_rounds_samples():
    run, most = counting_runs(0.2, lambda tag: [tag])
    with ConcurrentRuns(run, workers=6) as rounds:
        reads = [rounds(["A", "B", "C"], r, 2 - r) for r in range(2)]
        assert [read() for read in reads] == [{"A": ["A"], "B": ["B"], "C": ["C"]}] * 2
    assert most[0] == 6                                   # both rounds' three runs at once


def test_a_rounds_runs_start_before_the_next_rounds():
    starts, lock = [], threading.Lock()

    def run(tag: str) -> list:
        with lock:
            starts.append(tag)
        time.sleep(0.05)
        return []

    with ConcurrentRuns(run, workers=3) as rounds:        # a round takes the whole pool: the next one waits
        reads = [rounds(["A", "B", "C"], r, 3 - r) for r in range(3)]
        for read in reads:
            read()
    assert [sorted(starts[i:i + 3]) for i in (0, 3, 6)] == [["A", "B", "C"]] * 3


def test_a_failed_run_ends_the_race_with_its_error_when_its_round_is_read():
    def run(tag: str) -> list:
        if tag == "B":
            raise RuntimeError("B crashed")
        return []

    with ConcurrentRuns(run, workers=3) as rounds:
        read = rounds(list("ABC"), 0, 1)
        with pytest.raises(RuntimeError, match="B crashed"):
            read()


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

    read = ConcurrentRuns(run, workers=3, alone=alone)(["A", "B", "C"], 0, 1)
    assert read() == {"A": ["A"], "B": ["B alone"], "C": ["C"]} and alone_ran == ["B"]


def test_a_run_taken_again_alone_waits_for_the_runs_of_every_round_taken_to_end():
    from sweep.node.process import JobFailed
    from sweep.records import Status

    running, lock, beside = [0], threading.Lock(), []

    def run(tag: str) -> list:
        if tag == "B":
            raise JobFailed(Status.RUNTIME_FAILED, "profile", "prog exit 2: cudaMalloc: out of memory")
        with lock:
            running[0] += 1
        time.sleep(0.3)                                   # the later round's runs are still going
        with lock:
            running[0] -= 1
        return [tag]

    def alone(tag: str) -> list:
        beside.append(running[0])
        return [f"{tag} alone"]

    with ConcurrentRuns(run, workers=4, alone=alone) as rounds:
        first = rounds(["B"], 0, 2)
        rounds(["A", "C"], 1, 1)
        assert first() == {"B": ["B alone"]}
    assert beside == [0]


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


def test_an_overlap_race_of_host_heavy_programs_costs_its_runs_waves_or_their_gpu_work_not_every_run():
    first = race_cost.first_certifiable_round(3, 30)
    assert first == 9
    assert race_cost.cost_s(plan(False), host_heavy(0.8), 3) == pytest.approx(9 * 3 * 4.3)
    # the rounds up to the look together: 27 runs in two waves of 16, 8.6 s, more than 27 x 0.1 s of GPU work
    assert race_cost.cost_s(plan(True), host_heavy(0.1), 3) == pytest.approx(2 * 4.3)
    assert race_cost.cost_s(plan(True), host_heavy(0.8), 3) == pytest.approx(27 * 0.8)    # the GPU's work bounds it
    three_at_once = dataclasses.replace(plan(True), processes=3)                          # a wave a round
    assert race_cost.cost_s(three_at_once, host_heavy(0.1), 3) == pytest.approx(9 * 4.3)


def test_the_rounds_a_budget_buys_in_overlap_mode_count_the_waves_they_share():
    p = dataclasses.replace(plan(True), budget_s=20.0)
    # 21 rounds of 3: 63 runs, four waves of 16 at 4.3 s, 17.2 s; a 22nd round would need a fifth
    assert race_cost.affordable_rounds(p, host_heavy(0.1), 3) == 21
    assert race_cost.affordable_rounds(dataclasses.replace(p, overlap=False), host_heavy(0.1), 3) == \
        pytest.approx(20.0 / (3 * 4.3))


def test_an_overlap_races_waves_are_its_runs_without_the_sweeps_waits_for_other_programs():
    c = host_heavy(0.1)
    c.configs["gpu_wait_s"] = 2.3           # each of the sweep's runs queued 2.3 s behind up to 15 others
    assert race_cost.cost_s(plan(True), c, 3) == pytest.approx(2 * 2.0)     # two waves of a 2.0 s run


def test_without_gpu_busy_figures_an_overlap_race_is_estimated_as_runs_in_a_row():
    assert race_cost.cost_s(plan(True), host_heavy(None), 3) == race_cost.cost_s(plan(False), host_heavy(None), 3)


def test_a_plan_keeps_its_overlap_setting_and_one_without_it_keeps_its_digest():
    on, off = plan(True), plan(False)
    assert race.RacePlan.from_dict(on.to_dict()).overlap is True
    assert "overlap" not in off.to_dict() and on.digest() != off.digest()


def test_a_race_of_concurrent_runs_takes_the_rounds_up_to_its_first_look_at_once_and_certifies_there():
    import random

    from sweep.profile.base import Measurement

    noise = random.Random(7)

    def sample(tag: str) -> list:
        ns = (100_000 if tag == "P1" else 130_000) * noise.uniform(0.98, 1.02)
        return [Measurement("k", (1, 1, 1), (32, 1, 1), 1, ns, ns, ns, ns, 0.0, (ns,))]

    run, most = counting_runs(0.3, sample)
    p = dataclasses.replace(plan(True), lanes=(dataclasses.replace(plan(True).lanes[0],
                                                                    entrants=plan(True).lanes[0].entrants[:2]),))
    with ConcurrentRuns(run, workers=16) as rounds:
        raced = race.race(p, rounds)
    result = raced.results[("P",)]
    assert (result.status, result.pick, result.rounds, raced.rounds) == ("certified", "P1", 9, 9)
    assert most[0] == 16                                  # the first look's 18 runs, 16 at once
