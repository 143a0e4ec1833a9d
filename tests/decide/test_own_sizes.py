"""The program's own launch sizes as a race entrant: where the space declares no defaults for a
group, the baseline job (conf.cuh without the group's macros) races as "the program's own", and
when it wins best/conf.cuh leaves the group's macros unset. The toy's alpha_kernel is fastest at
--size; its own ALPHA_BLOCK is 256, a value the space below does not sweep."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
import yaml

from sweep.decide import certify, race_combined, select
from sweep.decide.candidates import _certified
from sweep.decide.collect import Collected
from sweep.node import race
from sweep.records import OWN_SIZES, Best, Candidate, Choice
from sweep.records.evidence import Certification
from sweep.space import check, pick_config, tag, target
from sweep.stats import Entrant
from tests.conftest import run_toy_sweep, toy_space_dict


def own_space(size: int = 256, **overrides) -> dict:
    """The toy with alpha fastest at `size`, ALPHA_BLOCK swept over 64 and 128 with no default."""
    d = toy_space_dict(**overrides)
    d["target"]["profile"] = ["{build}/toy_bench", "-n", "{iterations}", "--size", str(size)]
    d["parameters"] = {"ALPHA_BLOCK": {"tag": "A", "values": [64, 128], "kernels": ["alpha_kernel"]},
                       "BETA_X": {"tag": "B", "values": [32, 64], "default": 32, "kernels": ["beta_kernel"]},
                       "BETA_Y": {"tag": "B", "values": [1], "default": 1, "kernels": ["beta_kernel"]}}
    return d


@pytest.fixture
def space(tmp_path):
    path = tmp_path / "toy.yaml"
    d = own_space(constraints=["BETA_X * BETA_Y <= 64", "ALPHA_BLOCK <= 128"])
    d["parameters"]["BETA_Z"] = {"tag": "B", "equals": "BETA_X"}
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return target.load(path)


def test_a_pick_that_leaves_a_group_to_the_program_sets_none_of_its_macros_nor_their_derived_ones(space):
    assert pick_config(space, {"BETA_X": 64, "BETA_Y": 1}).as_dict() == {"BETA_X": 64, "BETA_Y": 1, "BETA_Z": 64}
    assert pick_config(space, {"ALPHA_BLOCK": 64}).as_dict() == {"ALPHA_BLOCK": 64}
    assert tag(space, pick_config(space, {"BETA_X": 32, "BETA_Y": 1})) == "Aown_B32x1x32"


def test_a_partial_pick_is_checked_against_the_rules_over_the_macros_it_sets_only(space):
    assert check(space, pick_config(space, {"BETA_X": 32, "BETA_Y": 1})) is None
    assert "BETA_X * BETA_Y <= 64 is false" in check(space, pick_config(space, {"BETA_X": 128, "BETA_Y": 1}))
    assert check(space, pick_config(space, {"ALPHA_BLOCK": 256})).startswith("ALPHA_BLOCK <= 128 is false")


def choice(*values: dict[str, int]) -> Choice:
    cands = tuple(Candidate(v, f"j{i}", 10.0 + i, 0.1, 1) for i, v in enumerate(values))
    return Choice(tuple(values[0]), ("k",), cands[0].values, cands[0], None, None, None, False, candidates=cands)


def test_the_baseline_runs_before_the_race_for_a_group_of_two_candidates_or_more_without_declared_defaults(space):
    beta = choice({"BETA_X": 32, "BETA_Y": 1}, {"BETA_X": 64, "BETA_Y": 1})   # its declared defaults are measured
    assert not certify.needs_baseline(space, Best("toy", (beta,), {}))
    two, one = choice({"ALPHA_BLOCK": 64}, {"ALPHA_BLOCK": 128}), choice({"ALPHA_BLOCK": 64})
    assert certify.needs_baseline(space, Best("toy", (beta, two), {}))
    assert not certify.needs_baseline(space, Best("toy", (beta, one), {}))


def test_the_default_rank_of_a_group_racing_the_programs_own_leaves_its_macros_unset(space):
    alpha = race.Lane(("ALPHA_BLOCK",), ("alpha_kernel",), (Entrant("a1", 128), Entrant("default", 256, True)),
                      {"a1": {"ALPHA_BLOCK": 128}, "default": {}})
    beta = race.Lane(("BETA_X", "BETA_Y"), ("beta_kernel",), (Entrant("b1", 64), Entrant("b2", 32, True)),
                     {"b1": {"BETA_X": 64, "BETA_Y": 1}, "b2": {"BETA_X": 32, "BETA_Y": 1}})
    p = race.RacePlan((alpha, beta), {t: f"/jobs/{t}" for t in ("a1", "default", "b1", "b2")}, {}, 30.0, 30)
    best = Best("toy", (), {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 1})
    assert dict(race_combined.combined(space, best, p)) == {"1": {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 1},
                                                      "default": {"BETA_X": 32, "BETA_Y": 1}}


def test_a_rank_of_declared_defaults_and_the_programs_own_is_the_baseline_job_and_no_sweep_job(space, tmp_path):
    cf = pd.DataFrame([{"tag": "A128_B32x1x32", "role": "sweep", "status": "ok", "config_hash": "h1",
                        "ALPHA_BLOCK": 128, "BETA_X": 32, "BETA_Y": 1, "BETA_Z": 32},
                       {"tag": "default", "role": "baseline", "status": "ok", "config_hash": "h0"}])
    c = Collected(cf, pd.DataFrame(), None)
    found = race_combined.find_entrants(space, [("default", {"BETA_X": 32, "BETA_Y": 1})], c, tmp_path)
    assert found == {"default": ("default", str(tmp_path / "default"), "h0")}
    assert race_combined.find_entrants(space, [("2", {"BETA_X": 64, "BETA_Y": 1})], c, tmp_path) == {}


def test_a_pick_beating_the_programs_own_names_it_the_runner_up_with_the_baseline_jobs_time():
    cands = [Candidate({"ALPHA_BLOCK": 128}, "A128", 1300.0, 5.0, 1), Candidate({"ALPHA_BLOCK": 64}, "A64", 2200.0, 5.0, 1)]
    cert = Certification("certified", {"ALPHA_BLOCK": 128}, "certified", runner_up={}, margin=0.25, ci_low=0.2,
                         ci_high=0.3, rounds=9, leader="A128",
                         entrants=({"tag": "A128", "values": {"ALPHA_BLOCK": 128}},
                                   {"tag": "default", "values": {}, "is_default": True}))
    c = _certified(("ALPHA_BLOCK",), ("alpha_kernel",), cands, cert, 1625.0, (), ())
    assert c.values == {"ALPHA_BLOCK": 128} and c.runner_up.values == {} and c.runner_up.ns == 1625.0
    (line,) = select.summary_lines(Best("toy", (c,), {"ALPHA_BLOCK": 128}))
    assert f"runner-up {OWN_SIZES} +25.0% (beyond noise)" in line


# ---------------------------------------------------------------------------
# end to end on the toy target (CPU programs)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_won(tmp_path_factory):
    """alpha fastest at the program's own 256, raced on combined configurations (a cap the race's
    estimate fits on a GPU host too, where the toy's runs take longer; it ends when it separates)."""
    return run_toy_sweep(tmp_path_factory.mktemp("own"), own_space(certify={"budget_s": 300, "lockstep": False}))


def test_the_programs_own_launch_sizes_win_the_race_and_best_conf_leaves_their_macros_unset(own_won):
    _, jobs, results, summary = own_won
    by = {c.macros: c for c in summary.best.choices}
    alpha, beta = by[("ALPHA_BLOCK",)], by[("BETA_X", "BETA_Y")]
    assert alpha.values == {} and alpha.certified and alpha.is_default and alpha.speedup_vs_default == 1.0
    assert {e["tag"]: e["values"] for e in alpha.certification.entrants}["default"] == {}
    assert alpha.runner_up.values == {"ALPHA_BLOCK": 128} and alpha.margin > 0.2
    assert beta.values == {"BETA_X": 64, "BETA_Y": 1} and beta.certified
    assert summary.best.config == {"BETA_X": 64, "BETA_Y": 1}
    for conf in (results / "toy" / "best" / "conf.cuh", jobs / "toy" / "best" / "conf.cuh"):
        defines = [x for x in conf.read_text().splitlines() if x.startswith("#define")]
        assert defines == ["#define BETA_X 64", "#define BETA_Y 1"]
    assert f"alpha_kernel: {OWN_SIZES} (unset in best/conf.cuh)" in select.summary_lines(summary.best)[0]
    best = json.loads((results / "toy" / "best.json").read_text())
    assert best["choices"][0]["values"] == {} and "leaves ALPHA_BLOCK unset" in best["choices"][0]["note"]
    page = (results / "toy" / "report.md").read_text()
    assert f"| alpha_kernel | {OWN_SIZES} |" in page
    html = (results / "toy" / "report.html").read_text()    # alpha's figure: the default's line is the pick
    assert "chosen: the program&#39;s own launch sizes" in html or "chosen: the program's own launch sizes" in html


def test_the_combined_race_takes_the_baseline_job_for_the_defaults_rank_and_builds_no_other(own_won):
    _, _, results, summary = own_won
    configs = pd.read_parquet(results / "toy" / "configs.parquet")
    assert "entrant" not in set(configs["role"])            # ranks 1 and 2 are sweep jobs, the default the baseline
    for c in summary.best.choices:
        assert {e["tag"] for e in c.certification.entrants} <= {"A128_B64x1", "A64_B64x1", "default"}
        assert "default" in {e["tag"] for e in c.certification.entrants}


def test_a_loss_to_the_default_job_by_the_sweeps_samples_carries_a_note_unless_the_race_weighed_the_default():
    pick = Candidate({"ALPHA_BLOCK": 128}, "A128", 1040.0, 5.0, 1)
    lost = Choice(("ALPHA_BLOCK",), ("alpha_kernel",), pick.values, pick, None, None, None, False, default_ns=1000.0,
                  speedup_vs_default=1000.0 / 1040.0, default_verdict="slower")
    assert select.defaults_won(lost).startswith("alpha_kernel: the program's own launch sizes (job 'default') ran")
    raced = Certification("certified", {"ALPHA_BLOCK": 128}, "certified", rounds=9,
                          entrants=({"tag": "A128", "values": {"ALPHA_BLOCK": 128}, "is_default": False},
                                    {"tag": "default", "values": {}, "is_default": True}))
    assert select.defaults_won(dataclasses.replace(lost, certification=raced)) is None
    short = dataclasses.replace(raced, status="tie", rounds=2, decisive_from=9)   # stopped before it could say a thing
    assert select.defaults_won(dataclasses.replace(lost, certification=short)) is not None


def test_a_kept_own_pick_is_the_default_and_its_note_names_every_macro_left_unset_derived_ones_too(space):
    cert = Certification("certified", {}, "certified", rounds=9,
                         entrants=({"tag": "default", "values": {}, "is_default": True},))
    c = _certified(("BETA_X", "BETA_Y"), ("beta_kernel",), [], cert, 1000.0, (), ())
    c = select.marked_default(space, c)
    assert c.is_default and c.values == {} and c.best.ns == 1000.0 and c.speedup_vs_default == 1.0
    assert c.note.endswith("best/conf.cuh leaves BETA_X, BETA_Y, BETA_Z unset, so the program's own values apply")


@pytest.mark.parametrize("job", ["default", "default__h100"])     # one GPU model; a partition's own baseline
def test_a_group_without_declared_defaults_races_the_measured_baseline_job_as_the_programs_own(space, job):
    m = pd.DataFrame([{"tag": job, "role": "baseline", "status": "ok", "kernel": "alpha_kernel",
                       "threads_per_block": 256}])
    alpha = choice({"ALPHA_BLOCK": 64}, {"ALPHA_BLOCK": 128})
    x = certify.lane(space, alpha, Collected(pd.DataFrame(), m, None))
    assert [(e.id, e.threads, e.is_default) for e in x.entrants] == [("j0", 1, False), ("j1", 1, False), (job, 256, True)]
    assert x.values[job] == {}
    assert certify.lane(space, alpha, Collected(pd.DataFrame(), m.iloc[0:0], None)).entrants[-1].id == "j1"


def test_collect_again_keeps_the_programs_own_pick_from_the_race_on_record(own_won):
    from sweep.pipeline import manage

    _, jobs, results, _ = own_won
    best, _ = manage.recollect("toy", jobs, results, report=False)
    alpha = next(c for c in best.choices if c.macros == ("ALPHA_BLOCK",))
    assert alpha.values == {} and alpha.certified and best.config == {"BETA_X": 64, "BETA_Y": 1}
    defines = [x for x in (results / "toy" / "best" / "conf.cuh").read_text().splitlines() if x.startswith("#define")]
    assert defines == ["#define BETA_X 64", "#define BETA_Y 1"]


# ---------------------------------------------------------------------------
# a candidate built byte-identical to the baseline job is the program's own, named
# ---------------------------------------------------------------------------


def test_a_candidate_built_byte_identical_to_the_baseline_job_is_the_default_entrant_in_its_place(space):
    cf = pd.DataFrame([{"tag": "j0", "role": "sweep", "status": "ok", "build_digest": "d64"},
                       {"tag": "j1", "role": "sweep", "status": "ok", "build_digest": "d256"},
                       {"tag": "default", "role": "baseline", "status": "ok", "build_digest": "d256"}])
    m = pd.DataFrame([{"tag": "default", "role": "baseline", "status": "ok", "kernel": "alpha_kernel",
                       "threads_per_block": 256}])
    alpha = choice({"ALPHA_BLOCK": 64}, {"ALPHA_BLOCK": 256})
    x = certify.lane(space, alpha, Collected(cf, m, None))
    assert [(e.id, e.is_default) for e in x.entrants] == [("j0", False), ("j1", True)]    # no job 'default'
    assert x.values["j1"] == {"ALPHA_BLOCK": 256}
    unrecorded = cf.assign(build_digest="")          # builds that recorded no objects: the baseline races as before
    assert certify.lane(space, alpha, Collected(unrecorded, m, None)).entrants[-1].id == "default"


@pytest.fixture(scope="module")
def own_among_values(tmp_path_factory):
    """alpha swept over 128 and its own 256 with no default, beta at its own values only: the sweep's
    A256 job is the program itself."""
    d = own_space(certify={"budget_s": 300, "lockstep": False})
    d["parameters"]["ALPHA_BLOCK"]["values"] = [128, 256]
    d["parameters"]["BETA_X"]["values"] = [32]
    return run_toy_sweep(tmp_path_factory.mktemp("own_named"), d)


def test_a_group_whose_values_hold_the_programs_own_races_it_once_and_names_it(own_among_values):
    _, _, results, summary = own_among_values
    (alpha,) = [c for c in summary.best.choices if c.macros == ("ALPHA_BLOCK",)]
    assert {e["tag"]: e["is_default"] for e in alpha.certification.entrants} == {"A128_B32x1": False, "A256_B32x1": True}
    assert alpha.values == {"ALPHA_BLOCK": 256} and alpha.certified and alpha.is_default
    assert alpha.speedup_vs_default == 1.0 and "byte-identical to the job 'default'" in alpha.note
    assert summary.best.config["ALPHA_BLOCK"] == 256
    assert "alpha_kernel: ALPHA_BLOCK=256" in select.summary_lines(summary.best)[0]
