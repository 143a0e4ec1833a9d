"""GPU-seconds under overlap mode (sweep/records/gpu_time.py): each job's share of its GPU's
measuring-phase wall time, and collect's gpu_s column built from result.json's intervals."""

from __future__ import annotations

import pytest

from sweep.decide.collect import _gpu_seconds
from sweep.records.gpu_time import shares


def test_jobs_that_never_overlap_each_cost_their_whole_interval():
    assert shares([("g", 0.0, 2.0), ("g", 2.0, 5.0)]) == [2.0, 3.0]


def test_overlapping_jobs_split_the_wall_time_and_their_shares_add_up_to_it():
    got = shares([("g", 0.0, 4.0), ("g", 2.0, 6.0), ("g", 3.0, 4.0)])
    # 0-2 alone: 2; 2-3 two: 0.5 each; 3-4 three: 1/3 each; 4-6 alone: 2
    assert got == pytest.approx([2 + 0.5 + 1 / 3, 0.5 + 1 / 3 + 2, 1 / 3])
    assert sum(got) == pytest.approx(6.0)


def test_jobs_on_different_gpus_never_share():
    assert shares([("a", 0.0, 4.0), ("b", 0.0, 4.0)]) == [4.0, 4.0]


def test_collect_gives_each_result_its_share_and_an_old_result_its_verify_and_profile_seconds():
    rows = [{"status": "ok", "host": "h", "gpu_uuid": "G", "gpu_interval": [0.0, 4.0], "profile_s": 3.9},
            {"status": "ok", "host": "h", "gpu_uuid": "G", "gpu_interval": [0.0, 4.0], "profile_s": 3.9},
            {"status": "ok", "host": "h", "gpu_uuid": "G", "gpu_interval": None, "verify_s": 1.0, "profile_s": 2.0},
            {"status": "pending"}]
    _gpu_seconds(rows)
    assert [r.get("gpu_s") for r in rows] == [2.0, 2.0, 3.0, None]
    assert all("gpu_interval" not in r for r in rows)


def _result(interval=None, stages=True, total=9.0, gpu="G"):
    from types import SimpleNamespace

    intervals = {"build": [0.0, 1.0], **({"gpu": interval} if interval else {})} if stages else {}
    return SimpleNamespace(intervals=intervals, env={"host": "h", "gpu_uuid": gpu}, timings={"total": total})


def test_the_budget_counts_each_job_by_what_its_measuring_adds_so_overlapping_jobs_cost_their_shares():
    from sweep.records.gpu_time import Spent

    spent = Spent()
    costs = [spent.of(_result(iv)) for iv in ([0.0, 4.0], [2.0, 6.0], [3.0, 4.0])]
    assert sum(costs) == pytest.approx(sum(shares([("g", 0.0, 4.0), ("g", 2.0, 6.0), ("g", 3.0, 4.0)])))
    assert sum(costs) == pytest.approx(6.0)     # not their intervals (9 s), nor their totals (27 s)
    assert spent.of(_result([0.0, 4.0], gpu="other")) == pytest.approx(4.0)   # another GPU's time is its own


def test_the_budget_counts_nothing_for_a_job_off_the_gpu_and_a_replayed_result_its_total():
    from sweep.records.gpu_time import Spent

    assert Spent().of(_result(None)) == 0.0                     # ran, never reached the GPU (a failed build)
    assert Spent().of(_result(None, stages=False)) == 9.0       # a replay's recorded cost, as before


def test_what_jobs_add_one_by_one_sums_to_the_time_their_intervals_cover_in_any_order():
    import random

    from sweep.core.spans import covered
    from sweep.records.gpu_time import Spent

    rng = random.Random(7)
    for _ in range(200):
        spans = [(a, a + rng.choice([0.0, 0.5, 1.0, rng.uniform(0, 5)]))
                 for a in (rng.choice([0.0, 1.0, 2.5, rng.uniform(0, 10)]) for _ in range(rng.randint(1, 12)))]
        spent, total = Spent(), 0.0
        for n, (a, b) in enumerate(spans, 1):
            total += spent.add("g", a, b)
            assert total == pytest.approx(covered(spans[:n]))
