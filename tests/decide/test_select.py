"""Picking launch sizes: fastest per group, margin over the runner-up, beyond-noise test."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sweep.decide import select
from sweep.space import target


def test_toy_sweep_picks_the_known_optima_beyond_noise(toy_sweep):
    space_path, _, _, summary = toy_sweep
    best = summary.best
    by_kernel = {c.kernels: c for c in best.choices}
    alpha, beta = by_kernel[("alpha_kernel",)], by_kernel[("beta_kernel",)]
    assert alpha.values == {"ALPHA_BLOCK": 128} and beta.values == {"BETA_X": 64, "BETA_Y": 4}
    assert alpha.runner_up.values == {"ALPHA_BLOCK": 256} or alpha.runner_up.values == {"ALPHA_BLOCK": 64}
    assert alpha.margin == pytest.approx(0.3, abs=0.05) and alpha.beyond_noise
    # verify_failed (96) and skipped (1024) values are never candidates
    assert {c.values["ALPHA_BLOCK"] for c in alpha.candidates} == {64, 128, 256}
    assert best.config == {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4}


def test_confirmation_compares_combined_best_with_defaults_and_sum_of_bests(toy_sweep):
    _, _, results, summary = toy_sweep
    conf = summary.confirmation
    assert conf.best_vs_sum_of_bests == pytest.approx(1.0, abs=0.02)  # toy kernels do not interact
    assert conf.speedup_vs_default > 1.2 and conf.vs_default["verdict"] == "faster"
    assert select.end_to_end_note(conf) is None
    assert (results / "toy" / "best" / "conf.cuh").read_text().count("#define") == 3


def frame(rows):
    """Measurements as collect writes them, for kernel k of parameter P."""
    out = []
    for tag, p, ns, std in rows:
        out.append({"tag": tag, "role": "sweep", "status": "ok", "P": p, "kernel": "k", "total_median_ns": ns,
                    "total_std_ns": std})
    return pd.DataFrame(out)


@pytest.fixture
def one_param_space(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ntarget: {name: t, dir: %s, profile: [x]}\n"
                    "parameters:\n  P: {tag: P, values: [1, 2, 3], kernels: [k]}\n" % (tmp_path,))
    (tmp_path / "Makefile").write_text("all:\n")
    return target.load(path)


def test_a_margin_smaller_than_the_spread_is_within_noise(one_param_space):
    m = frame([("a", 1, 1000.0, 20.0), ("b", 2, 1010.0, 20.0), ("c", 3, 2000.0, 20.0)])
    c = select.choose(one_param_space, m, ("P",))
    assert c.values == {"P": 1} and c.runner_up.values == {"P": 2}
    assert c.margin == pytest.approx(0.01)
    assert c.noise_ns == pytest.approx(2 * math.sqrt(20.0**2 + 20.0**2))
    assert not c.beyond_noise and "noise" in c.note


def test_a_margin_larger_than_the_spread_is_beyond_noise(one_param_space):
    c = select.choose(one_param_space, frame([("a", 1, 1000.0, 5.0), ("b", 2, 1100.0, 5.0)]), ("P",))
    assert c.beyond_noise and c.margin == pytest.approx(0.1)


def test_a_value_measured_in_several_jobs_counts_with_its_median(one_param_space):
    m = frame([("a1", 1, 900.0, 1.0), ("a2", 1, 1300.0, 1.0), ("a3", 1, 1200.0, 1.0), ("b", 2, 1100.0, 1.0)])
    c = select.choose(one_param_space, m, ("P",))
    assert c.values == {"P": 2}  # value 1's median (1200) loses despite its one fast job
    assert {x.values["P"]: x.jobs for x in c.candidates} == {1: 3, 2: 1}


def test_failed_jobs_and_other_roles_are_never_candidates(one_param_space):
    m = frame([("a", 1, 1000.0, 1.0), ("b", 2, 500.0, 1.0), ("c", 3, 400.0, 1.0)])
    m.loc[m["tag"] == "b", "status"] = "verify_failed"
    m.loc[m["tag"] == "c", "role"] = "baseline"
    c = select.choose(one_param_space, m, ("P",))
    assert c.values == {"P": 1} and c.runner_up is None and "only one value" in c.note


def test_parameters_whose_kernels_never_ran_keep_their_default_and_are_named(one_param_space):
    m = frame([("a", 1, 1000.0, 1.0)])
    m["kernel"] = "other_kernel"
    best = select.select(one_param_space, m)
    assert best.unmeasured == ("P",) and "no launch of k" in best.notes[0]


def test_a_pick_that_is_the_declared_default_reads_as_the_default_not_as_a_ratio_of_two_jobs(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ntarget: {name: t, dir: %s, profile: [x]}\n"
                    "parameters:\n  P: {tag: P, values: [1, 2, 3], default: 2, kernels: [k]}\n" % (tmp_path,))
    (tmp_path / "Makefile").write_text("all:\n")
    space = target.load(path)
    baseline = {"tag": "baseline", "role": "baseline", "status": "ok", "kernel": "k", "total_median_ns": 980.0,
                "total_std_ns": 5.0}   # the default's own job, a little faster than the sweep's run of P=2: noise
    m = pd.concat([frame([("a", 1, 1100.0, 5.0), ("b", 2, 1000.0, 5.0)]), pd.DataFrame([baseline])])
    best = select.select(space, m)
    (c,) = best.choices
    assert c.values == {"P": 2} and c.is_default and c.speedup_vs_default == 1.0 and c.default_ns == 980.0
    assert "the default" in select.summary_lines(best)[0] and "x vs default" not in select.summary_lines(best)[0]
    m.loc[m["tag"] == "a", "total_median_ns"] = 900.0
    (c,) = select.select(space, m).choices
    assert c.values == {"P": 1} and not c.is_default and c.speedup_vs_default == pytest.approx(980.0 / 900.0)


def _raced_choice(rounds: int, status: str = "tie"):
    from sweep.records.evidence import Certification
    from sweep.records import Candidate, Choice

    sweep_pick = Candidate({"GELU_BLOCK_SIZE": 512}, "G512", 10.0, 0.1, 1, samples=5)
    cert = Certification(status, {"GELU_BLOCK_SIZE": 128}, "default in tied set",
                         tied=({"GELU_BLOCK_SIZE": 128}, {"GELU_BLOCK_SIZE": 512}), rounds=rounds, stopped="budget")
    return Choice(("GELU_BLOCK_SIZE",), ("gelu_kernel",), {"GELU_BLOCK_SIZE": 512}, sweep_pick, None, None, None,
                  False, certification=cert)


def test_a_race_too_short_for_evidence_says_the_sweeps_pick_stands_not_the_tie_rule_it_did_not_apply():
    from sweep.records import Best
    from sweep.decide.select import summary_lines

    line, = summary_lines(Best("s", (_raced_choice(rounds=1),), {"GELU_BLOCK_SIZE": 512}))
    assert "GELU_BLOCK_SIZE=512" in line and "the sweep's pick stands" in line and "by rule" not in line
    line, = summary_lines(Best("s", (_raced_choice(rounds=12),), {"GELU_BLOCK_SIZE": 512}))
    assert "tie: 128 | 512 (picked by rule: default in tied set)" in line


@pytest.mark.parametrize("verdict, source, words", [
    ("faster", "iterations", "(beyond one run's noise)"),   # a run's own offset not weighed (evidence.verdict_words)
    ("faster", "runs", "(beyond noise)"),
    ("tie", "iterations", "(within noise)"),
    ("unknown", "unknown", "(noise unknown)"),
])
def test_a_margin_reads_beyond_noise_only_when_several_runs_were_weighed(verdict, source, words):
    from sweep.records import Best, Candidate, Choice
    from sweep.decide.select import summary_lines

    pick = Candidate({"GELU_BLOCK_SIZE": 512}, "G512", 10.0, 0.1, 1, samples=5)
    runner_up = Candidate({"GELU_BLOCK_SIZE": 128}, "G128", 10.6, 0.1, 1, samples=5)
    choice = Choice(("GELU_BLOCK_SIZE",), ("gelu_kernel",), {"GELU_BLOCK_SIZE": 512}, pick, runner_up, 0.06, 0.2,
                    verdict == "faster", noise_source=source, verdict=verdict)
    line, = summary_lines(Best("s", (choice,), {"GELU_BLOCK_SIZE": 512}))
    assert f"runner-up 128 +6.0% {words}" in line


def _two_pattern_space(tmp_path, a_kernels, b_kernels):
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({"name": "two", "target": {"name": "t", "dir": str(tmp_path), "profile": ["x"]},
                                    "parameters": {"AA": {"tag": "A", "values": [1, 2], "default": 1, "kernels": a_kernels},
                                                   "BB": {"tag": "B", "values": [1, 2], "default": 1, "kernels": b_kernels}}}))
    (tmp_path / "Makefile").write_text("all:\n")
    return target.load(path)


def _grid_rows():
    """A 2 x 2 grid: k_a's time depends on both AA and BB (BB's '*' matches it too); x_b's on BB only."""
    rows = []
    for aa in (1, 2):
        for bb in (1, 2):
            for kernel, ns in (("k_a", 1000.0 * aa + 300.0 * bb), ("x_b", 500.0 + 50.0 * bb)):
                rows.append({"tag": f"A{aa}_B{bb}", "role": "sweep", "status": "ok", "AA": aa, "BB": bb,
                             "kernel": kernel, "total_median_ns": ns, "total_std_ns": 1.0})
    return pd.DataFrame(rows)


def test_parameters_whose_patterns_match_a_common_measured_kernel_are_one_group(tmp_path):
    best = select.select(_two_pattern_space(tmp_path, ["k_*"], ["*"]), _grid_rows())
    [choice] = best.choices
    assert choice.macros == ("AA", "BB") and choice.kernels == ("k_a", "x_b")   # k_a counted once
    assert choice.values == {"AA": 1, "BB": 1} and choice.best.ns == pytest.approx(1000 + 300 + 550)


def test_parameters_whose_patterns_match_no_common_measured_kernel_stay_apart(tmp_path):
    best = select.select(_two_pattern_space(tmp_path, ["k_*"], ["x_*"]), _grid_rows())
    assert [c.macros for c in best.choices] == [("AA",), ("BB",)]


@pytest.mark.parametrize("best, default, verdict, warned", [
    ([1300.0, 1301.0, 1302.0, 1300.5, 1301.5], [1000.0, 1001.0, 1002.0, 1000.5, 1001.5], "slower", True),
    # beyond noise but by 0.3%, as the H200's seed run (a 0.04% drift of the matmul both jobs share): no decision
    ([1003.0, 1003.5, 1004.0, 1003.2, 1003.7], [1000.0, 1000.5, 1001.0, 1000.2, 1000.7], "equivalent", False),
    ([1000.0, 1050.0, 950.0, 1025.0, 975.0], [1010.0, 1040.0, 960.0, 1020.0, 980.0], "tie", False),
    ([1300.0], [1000.0], "unknown", False)])
def test_the_end_to_end_jobs_samples_decide_whether_the_combined_pick_lost_to_the_defaults(one_param_space, best,
                                                                                        default, verdict, warned):
    m = frame([("a", 1, 1000.0, 1.0), ("b", 2, 1100.0, 1.0)])
    ends = pd.DataFrame([{"tag": tag, "role": role, "status": "ok", "P": p, "kernel": "k",
                          "total_median_ns": sorted(x)[len(x) // 2], "total_std_ns": 1.0, "iter_total_ns": x}
                         for tag, role, p, x in (("best", "best", 1, best), ("default", "baseline", 2, default))])
    m = pd.concat([m, ends], ignore_index=True)
    conf = select.confirmation(one_param_space, m, pd.DataFrame(), select.select(one_param_space, m))
    assert select.end_to_end_verdict(conf.vs_default) == verdict
    note = select.end_to_end_note(conf)
    assert (note is not None) == warned
    if warned:
        assert note.startswith("end to end, the combined pick ran 30.0% slower than the default launch sizes, beyond "
                               "noise (95% interval")
    assert select.end_to_end_words(conf.vs_default) == {"slower": "SLOWER beyond noise", "equivalent": "within 1%",
                                                        "tie": "within noise", "unknown": "noise unknown"}[verdict]


H200_SEED = Path(__file__).resolve().parents[1] / "data" / "h200" / "seed_e2e"


def test_on_the_h200_seed_run_a_loss_to_the_defaults_within_noise_carries_no_note_and_the_end_to_end_is_within_1pct():
    space = target.load(Path(__file__).resolve().parents[2] / "spaces" / "seed.yaml")
    m = pd.read_csv(H200_SEED / "measurements.csv")
    m["iter_total_ns"] = m["iter_total_ns"].map(lambda s: tuple(ast.literal_eval(s)) if isinstance(s, str) else None)
    best = select.select(space, m)
    lines = "\n".join(select.summary_lines(best))
    encoder = next(c for c in best.choices if c.kernels == ("encoder_kernel",))
    assert encoder.values["ENCODER_BLOCK_X"] == 8 and encoder.speedup_vs_default < 1        # by the medians
    assert encoder.default_verdict == "tie" and "0.99x vs default (within noise)" in lines   # by the samples
    assert "1.14x vs default (faster beyond noise)" in lines                                 # gelu's 512
    assert not any("the program's own launch sizes" in n for n in best.notes)
    conf = select.confirmation(space, m, pd.read_parquet(H200_SEED / "configs.parquet"), best)
    recorded = json.loads((H200_SEED / "confirmation.json").read_text())
    assert conf.vs_default == recorded["vs_default"] and conf.vs_default["verdict"] == "faster"   # beyond noise,
    assert select.end_to_end_verdict(conf.vs_default) == "equivalent"                            # by under 1%
    assert select.end_to_end_note(conf) is None


def test_each_parameter_groups_objective_is_the_time_of_the_kernels_it_governs_and_a_group_unmeasured_is_left_out():
    from sweep.profile import Measurement
    data = Path(__file__).resolve().parents[1] / "data"
    space = target.load(data / "toy_space.yaml")
    ms = [Measurement("alpha_kernel", (1, 1, 1), (128, 1, 1), 1, 0, 0, 0, 0, 0, (100.0, 110.0)),
          Measurement("beta_kernel", (1, 1, 1), (64, 4, 1), 1, 0, 0, 0, 0, 0, (20.0, 20.0)),
          Measurement("other_kernel", (1, 1, 1), (32, 1, 1), 1, 0, 0, 0, 0, 0, (1e6,))]
    parts = select.group_objectives(space, ms)
    assert parts.keys() == {("ALPHA_BLOCK",), ("BETA_X", "BETA_Y")}
    assert sum(parts.values()) == pytest.approx(select.objective_ns(space, ms))
    assert parts[("BETA_X", "BETA_Y")] == pytest.approx(20.0)
    assert select.group_objectives(space, ms[:1]).keys() == {("ALPHA_BLOCK",)}
