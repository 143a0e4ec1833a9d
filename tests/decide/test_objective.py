"""Picks over workloads: each workload's own pick, the overall pick by the weighted objective
(sum over workloads of weight x the group's time there) and its regret on each workload, the
race on that objective, and the whole of it through the toy target (no GPU).

Recorded samples: tests/data/h100/nsys_kernel_bench_blocks.sqlite (real H100 launches, five
per block size). Two kernels stand in for one kernel at two shapes, two workloads whose best
block sizes differ: at 32, 64 and 1024 threads gelu_kernel is fastest at 1024 and
layernorm_kernel at 32, so with equal weights the overall pick, 64, is neither's own.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from sweep.decide import certify, collect, race_cost, select
from sweep.node import race
from sweep.space import target
from sweep.decide.objective import weighted_times
from sweep.profile import Measurement
from sweep.records import Best, load_record
from sweep.stats import Entrant
from tests.decide.test_trust import recorded, rows, run_toy_sweep, toy_space_dict

DATA = Path(__file__).resolve().parents[1] / "data"
GELU, LN = recorded("gelu_kernel"), recorded("layernorm_kernel")
BLOCKS = (32, 64, 1024)                  # P = block / 32: 1, 2, 32


def med(samples: list[float]) -> float:
    return float(np.median(samples))


def measured(blocks=BLOCKS, workloads=(("gelu", GELU), ("ln", LN)), **extra) -> pd.DataFrame:
    """One job per block size, measured on each workload (kernel k), as collect writes the rows."""
    return pd.concat([rows([(f"P{b // 32}", b // 32, data[b]) for b in blocks], workload=name, **extra)
                      for name, data in workloads], ignore_index=True)


def space_with(tmp_path: Path, **weights: float):
    path = tmp_path / "s.yaml"
    wl = [{"name": n, "weight": w} for n, w in weights.items()]
    path.write_text(yaml.safe_dump({
        "name": "s", "target": {"name": "t", "dir": str(tmp_path), "profile": ["x"]},
        "parameters": {"P": {"tag": "P", "values": [1, 2, 32], "default": 1, "kernels": ["k"]}},
        **({"workloads": wl} if wl else {})}))
    (tmp_path / "Makefile").write_text("all:\n")
    return target.load(path)


def test_each_workload_gets_its_own_pick_and_the_overall_pick_minimizes_the_weighted_sum(tmp_path):
    c = select.choose(space_with(tmp_path, gelu=1, ln=1), measured(), ("P",))
    own = {w.workload: w for w in c.workloads}
    assert own["gelu"].values == {"P": 32} and own["ln"].values == {"P": 1}
    assert c.values == {"P": 2}                                        # the compromise: neither workload's own
    assert c.best.ns == pytest.approx(med(GELU[64]) + med(LN[64]))
    assert own["gelu"].overall_ns == pytest.approx(med(GELU[64]))
    assert own["gelu"].regret == pytest.approx(med(GELU[64]) / med(GELU[1024]) - 1)
    assert own["ln"].regret == pytest.approx(med(LN[64]) / med(LN[32]) - 1)
    assert own["gelu"].candidates == 3 and own["gelu"].weight == 1.0 and own["gelu"].tag == "P32"


def test_the_weights_decide_the_overall_pick_and_its_regrets(tmp_path):
    c = select.choose(space_with(tmp_path, gelu=20, ln=1), measured(), ("P",))
    own = {w.workload: w for w in c.workloads}
    assert c.values == {"P": 32} and own["gelu"].regret == 0.0
    assert own["ln"].regret == pytest.approx(med(LN[1024]) / med(LN[32]) - 1)
    assert c.best.ns == pytest.approx(20 * med(GELU[1024]) + med(LN[1024]))


def test_the_overall_evidence_compares_samples_of_the_weighted_sum(tmp_path):
    space = space_with(tmp_path, gelu=1, ln=1)
    c = select.choose(space, measured(), ("P",))
    assert c.best.samples == 5 and c.noise_source == "iterations" and c.verdict in ("faster", "tie")
    assert c.runner_up.values == {"P": 1}
    per = {name: select.group_times(space, measured(workloads=[(name, data)]), ("P",))
           for name, data in (("gelu", GELU), ("ln", LN))}
    t = weighted_times(per, {"gelu": 2.0, "ln": 1.0}, ("P",))
    row = t.set_index("tag").loc["P2"]
    assert list(row["samples"]) == pytest.approx([2 * g + n for g, n in zip(GELU[64], LN[64])])


def test_a_workload_that_never_launches_the_groups_kernels_adds_nothing_to_it(tmp_path):
    other = rows([(f"P{b // 32}", b // 32, GELU[b]) for b in BLOCKS], kernel="other_kernel", workload="decode")
    m = pd.concat([measured(), other], ignore_index=True)
    c = select.choose(space_with(tmp_path, gelu=1, ln=1, decode=100), m, ("P",))
    assert c.values == {"P": 2} and c.best.ns == pytest.approx(med(GELU[64]) + med(LN[64]))
    assert [w.workload for w in c.workloads] == ["gelu", "ln"]


def test_a_job_not_measured_on_every_workload_is_left_out_of_the_overall_but_not_of_its_workload(tmp_path):
    m = measured()
    m = m[~((m["tag"] == "P1") & (m["workload"] == "ln"))]
    c = select.choose(space_with(tmp_path, gelu=1, ln=1), m, ("P",))
    assert {x.values["P"] for x in c.candidates} == {2, 32}
    assert {w.workload: w.candidates for w in c.workloads} == {"gelu": 3, "ln": 2}


def test_the_default_launch_sizes_are_weighed_by_the_same_objective(tmp_path):
    base = measured(blocks=(32,)).assign(role="baseline", tag="default")
    c = select.select(space_with(tmp_path, gelu=1, ln=1), pd.concat([measured(), base], ignore_index=True)).choices[0]
    assert c.default_ns == pytest.approx(med(GELU[32]) + med(LN[32]))
    assert c.speedup_vs_default == pytest.approx(c.default_ns / c.best.ns)


def test_a_space_without_workloads_picks_from_a_table_with_or_without_the_workload_column(tmp_path):
    space = space_with(tmp_path)
    old = rows([(f"P{b // 32}", b // 32, GELU[b]) for b in BLOCKS])
    new = old.assign(workload="")
    a, b = select.choose(space, old, ("P",)), select.choose(space, new, ("P",))
    assert a == b and a.values == {"P": 32} and a.workloads == ()


def test_best_json_records_the_workloads_and_each_groups_picks_and_round_trips(tmp_path):
    space = space_with(tmp_path, gelu=1, ln=3)
    best = select.select(space, measured())
    path, _ = select.write_best(best, tmp_path / "results", "// conf\n")
    data = json.loads(path.read_text())
    assert data["schema"] == "sweep-best/4"
    assert [w["name"] for w in data["workloads"]] == ["gelu", "ln"] and data["workloads"][1]["weight"] == 3.0
    assert {w["workload"] for w in data["choices"][0]["workloads"]} == {"gelu", "ln"}
    assert load_record(Best, path) == best


def test_a_best_json_of_schema_2_reads_as_one_without_workloads():
    best = load_record(Best, DATA / "h100_sweep" / "seed" / "best.json")
    assert json.loads((DATA / "h100_sweep" / "seed" / "best.json").read_text())["schema"] == "sweep-best/2"
    assert best.schema == "sweep-best/4" and best.workloads == () and all(c.workloads == () for c in best.choices)


def test_the_summary_lines_give_each_workloads_pick_and_the_overall_picks_regret(tmp_path):
    lines = select.summary_lines(select.select(space_with(tmp_path, gelu=1, ln=1), measured()))
    assert "us weighted" in lines[0]
    assert lines[1].startswith("  gelu (weight 1): 32") and "overall pick +" in lines[1]
    assert lines[2].startswith("  ln (weight 1): 1")


def test_model_based_search_minimizes_the_weighted_objective(tmp_path):
    space = space_with(tmp_path, gelu=2, ln=1)
    ms = [Measurement("k", (1, 1, 1), (64, 1, 1), 1, 0, 0, 0, 0, 0, (100.0,), workload="gelu"),
          Measurement("k", (1, 1, 1), (64, 1, 1), 1, 0, 0, 0, 0, 0, (10.0,), workload="ln"),
          Measurement("ungoverned", (1, 1, 1), (64, 1, 1), 1, 0, 0, 0, 0, 0, (1e6,), workload="ln")]
    assert select.objective_ns(space, ms) == pytest.approx(210.0)


# ---------------------------------------------------------------------------
# the race, on the weighted objective
# ---------------------------------------------------------------------------


def test_the_race_samples_every_workload_of_each_entrant_and_certifies_the_weighted_pick():
    lane = race.Lane(("P",), ("k",), tuple(Entrant(f"P{b // 32}", b) for b in BLOCKS), {f"P{b // 32}": {"P": b // 32}
                                                                                      for b in BLOCKS})
    plan = race.RacePlan((lane,), {e.id: "/nowhere" for e in lane.entrants}, {}, 60.0, 30, weights={"gelu": 1.0, "ln": 1.0})
    calls: list[str] = []

    def run(tag):
        i = calls.count(tag) % 5
        calls.append(tag)
        b = 32 * int(tag[1:])
        return [Measurement("k", (1, 1, 1), (b, 1, 1), 1, 0, 0, 0, 0, 0, (GELU[b][i],), workload="gelu"),
                Measurement("k", (1, 1, 1), (b, 1, 1), 1, 0, 0, 0, 0, 0, (LN[b][i],), workload="ln")]

    result = race.race(plan, race.each_run(run)).results[("P",)]
    assert result.pick == "P2" and result.certified
    assert result.medians["P2"] == pytest.approx(med([g + n for g, n in zip(GELU[64], LN[64])]))


def test_a_race_plan_weighs_workloads_only_when_the_space_has_them():
    lane = race.Lane(("P",), ("k",), (Entrant("a", 32), Entrant("b", 64)), {"a": {"P": 1}, "b": {"P": 2}})
    plain = race.RacePlan((lane,), {"a": "/a", "b": "/b"}, {}, 10.0, 30)
    assert "weights" not in plain.to_dict()                 # a plan without workloads keeps its digest
    weighted = dataclasses.replace(plain, weights={"x": 2.0})
    assert race.RacePlan.from_dict(weighted.to_dict()) == weighted and weighted.digest() != plain.digest()
    assert "lockstep" not in plain.to_dict() and "turns" not in plain.to_dict()   # nor of a race a run a round
    lockstep = dataclasses.replace(plain, lockstep=True, turns=5, processes=8)
    assert race.RacePlan.from_dict(lockstep.to_dict()) == lockstep and lockstep.digest() != plain.digest()
    ms = [Measurement("k", (1, 1, 1), (32, 1, 1), 1, 0, 0, 0, 0, 0, (10.0,), workload="x"),
          Measurement("k", (1, 1, 1), (32, 1, 1), 1, 0, 0, 0, 0, 0, (5.0,), workload="y")]
    assert race.group_ns(ms, ("k",), {"x": 2.0, "y": 1.0}) == 25.0 and race.group_ns(ms, ("k",)) == 15.0


def test_a_round_of_a_race_over_workloads_is_expected_to_take_one_run_per_workload():
    configs = pd.DataFrame([{"tag": "a", "profile_s": 4.0, "runs": 2}])   # two workloads, one run each
    assert race_cost.round_s(configs, ["a"], workloads=2) == pytest.approx(4.0)
    assert race_cost.round_s(configs, ["a"]) == pytest.approx(2.0)


# ---------------------------------------------------------------------------
# end to end on the toy target: toy_bench --size 64 makes alpha_kernel fastest at 64, not 128
# ---------------------------------------------------------------------------

SMALL = {"small": {"profile": ["{build}/toy_bench", "-n", "{iterations}", "--size", "64"],
                   "events": ["--json", "{events_json}"]}}


@pytest.fixture(scope="module")
def workloads_sweep(tmp_path_factory):
    """The toy with two workloads (big: the default program, alpha best at 128; small, weight 3: alpha
    best at 64), three rows, confirmed and raced: (space path, jobs, results, RunSummary)."""
    root = tmp_path_factory.mktemp("workloads")
    d = toy_space_dict(strategy="tuples", tuples={"columns": ["ALPHA_BLOCK", "BETA_X", "BETA_Y"],
                                                  "rows": [[64, 64, 4], [128, 64, 4], [256, 64, 4]]},
                       certify={"budget_s": 30},
                       workloads=[{"name": "big"}, {"name": "small", "weight": 3, "program": "small", "iterations": 5}])
    d["target"]["programs"] = SMALL
    return run_toy_sweep(root, d)


def test_a_toy_sweep_over_two_workloads_picks_each_ones_own_and_the_weighted_overall(workloads_sweep):
    _, _, results, summary = workloads_sweep
    alpha = next(c for c in summary.best.choices if c.macros == ("ALPHA_BLOCK",))
    own = {w.workload: w for w in alpha.workloads}
    assert own["big"].values == {"ALPHA_BLOCK": 128} and own["small"].values == {"ALPHA_BLOCK": 64}
    assert alpha.values == {"ALPHA_BLOCK": 64}            # 1 x 1300 + 3 x 1000 beats 1 x 1000 + 3 x 1300
    assert own["big"].regret == pytest.approx(0.3, abs=0.03) and own["small"].regret == 0.0
    assert "#define ALPHA_BLOCK 64" in (results / "toy" / "best" / "conf.cuh").read_text()


def test_every_row_of_the_tables_carries_its_workload(workloads_sweep):
    _, _, results, _ = workloads_sweep
    m = pd.read_parquet(results / "toy" / "measurements.parquet")
    sweep = m[m["role"] == "sweep"]
    assert set(sweep["workload"]) == {"big", "small"}
    assert set(sweep.groupby("tag")["workload"].nunique()) == {2}
    assert set(sweep.loc[sweep["workload"] == "small", "iterations"]) == {5}
    assert set(sweep.loc[sweep["workload"] == "big", "iterations"]) == {7}


def test_the_race_certifies_the_weighted_pick_running_every_workload_each_round(workloads_sweep):
    _, jobs, _, summary = workloads_sweep
    alpha = next(c for c in summary.best.choices if c.macros == ("ALPHA_BLOCK",))
    assert alpha.certified and alpha.values == {"ALPHA_BLOCK": 64} and alpha.noise_source == "race"
    outcome = certify.latest_outcome(jobs / "toy")
    plan = json.loads(next((jobs / "toy" / certify.RACES).glob(f"*/{race.PLAN}")).read_text())
    assert plan["weights"] == {"big": 1.0, "small": 3.0}
    entrants = len(plan["jobs"])
    assert outcome["runs"] == outcome["rounds"] * entrants * 2       # each entrant runs both workloads a round


def test_reweighting_reselects_from_the_same_measurements(workloads_sweep):
    space_path, jobs, _, _ = workloads_sweep
    space = target.load(space_path)
    m = collect.collect(jobs / "toy").measurements
    light = dataclasses.replace(space, workloads=tuple(dataclasses.replace(w, weight=0.1) if w.name == "small" else w
                                                       for w in space.workloads))
    alpha = next(c for c in select.select(light, m).choices if c.macros == ("ALPHA_BLOCK",))
    assert alpha.values == {"ALPHA_BLOCK": 128}
