"""Picks you can trust: evidence from measured samples, the certification race, one GPU per
comparison, per-shape regret, and the whole of it through the toy target (no GPU).

Recorded samples: tests/data/h100/nsys_kernel_bench_blocks.sqlite, real launches of
the engine's memory-bound kernels at six block sizes on an H100 (five each).
"""

from __future__ import annotations

import dataclasses

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from sweep.decide import certify, race_combined, race_cost, select
from sweep.node import clocks, job as job_mod, race
from sweep.pipeline import driver as pipeline, manage
from sweep.profile import Measurement
from sweep.records import JobResult
from sweep.stats import Entrant
from tests.conftest import H100, run_toy_sweep, toy_space_dict

CAPTURE = H100 / "nsys_kernel_bench_blocks.sqlite"


def recorded(kernel: str) -> dict[int, list[float]]:
    """block size -> the capture's launch durations (ns), in launch order."""
    out: dict[int, list[float]] = {}
    with sqlite3.connect(CAPTURE) as c:
        for block, dur in c.execute("select k.blockX, k.end - k.start from CUPTI_ACTIVITY_KIND_KERNEL k join "
                                    "StringIds s on s.id = k.shortName where s.value = ? order by k.start", (kernel,)):
            out.setdefault(block, []).append(float(dur))
    return out


def rows(jobs, kernel="k", **extra) -> pd.DataFrame:
    """Measurement rows as collect writes them: (tag, P, samples[, runs]) per job."""
    out = []
    for tag, p, samples, *runs in jobs:
        s = [float(x) for x in samples]
        out.append({"tag": tag, "role": "sweep", "status": "ok", "P": p, "kernel": kernel, "grid": "4x1x1",
                    "block": f"{32 * p}x1x1", "calls": 1, "threads_per_block": 32 * p, "iterations": len(s),
                    "total_median_ns": float(np.median(s)), "total_std_ns": float(np.std(s, ddof=1)) if len(s) > 1 else 0.0,
                    "iter_total_ns": s, "runs": runs[0] if runs else 1, **extra})
    return pd.DataFrame(out)


@pytest.fixture
def space(tmp_path):
    from sweep.space import target

    path = tmp_path / "s.yaml"
    path.write_text("name: s\ntarget: {name: t, dir: %s, profile: [x]}\n"
                    "parameters:\n  P: {tag: P, values: [1, 2, 3, 4], default: 1, kernels: [k]}\n" % (tmp_path,))
    (tmp_path / "Makefile").write_text("all:\n")
    return target.load(path)


# ---------------------------------------------------------------------------
# evidence from samples
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("table", ["samples", "summary only"])
def test_a_one_iteration_capture_never_yields_beyond_noise(space, table):
    m = rows([("a", 1, [1000.0]), ("b", 2, [1017.0])])       # one NVTX iteration a run: a 1.7% margin, no spread
    if table == "summary only":
        m = m.drop(columns=["iter_total_ns", "runs"])
    c = select.choose(space, m, ("P",))
    assert c.values == {"P": 1} and c.margin == pytest.approx(0.017)
    assert c.verdict == "unknown" and c.noise_source == "unknown" and not c.beyond_noise
    assert "noise unknown" in c.note


def test_repeated_runs_measure_the_noise_a_one_iteration_margin_is_weighed_against(space):
    rng = np.random.default_rng(0)
    a = 1000 * (1 + 0.002 * rng.standard_normal(5))
    c = select.choose(space, rows([("a", 1, a, 5), ("b", 2, a * 1.017, 5)]), ("P",))
    assert c.verdict == "faster" and c.beyond_noise and c.noise_source == "runs"
    assert 0 < c.margin_ci_low <= c.margin <= c.margin_ci_high and c.confidence == 0.95
    tie = select.choose(space, rows([("a", 1, a, 5), ("b", 2, a[::-1] * 1.001, 5)]), ("P",))
    assert tie.verdict == "tie" and not tie.beyond_noise and tie.margin_ci_low < 0 < tie.margin_ci_high


def test_candidates_compare_their_samples_pooled_over_their_jobs(space):
    m = rows([("a1", 1, [100, 101, 102]), ("a2", 1, [103, 104, 105]), ("b", 2, [120, 121, 122])])
    c = select.choose(space, m, ("P",))
    assert c.best.samples == 6 and c.best.jobs == 2 and c.runner_up.samples == 3
    assert c.verdict == "faster" and c.noise_source == "iterations" and c.best.iqr_ns == pytest.approx(2.5)


def test_only_the_gpu_model_with_most_jobs_is_compared(space):
    m = pd.concat([rows([("a", 1, [100, 101, 102]), ("b", 2, [110, 111, 112])], gpu="NVIDIA H100"),
                   rows([("c", 3, [50, 51, 52])], gpu="NVIDIA A40")])
    best = select.select(space, m)
    assert best.config == {"P": 1} and {x.values["P"] for x in best.choices[0].candidates} == {1, 2}
    assert "only NVIDIA H100 (2 jobs) compared" in best.notes[0] and "NVIDIA A40 (1 jobs)" in best.notes[0]


def test_a_pick_whose_candidates_ran_on_different_gpus_is_flagged(space):
    m = rows([("a", 1, [100, 101, 102]), ("b", 2, [110, 111, 112])])
    m["gpu_uuid"] = ["GPU-1", "GPU-2"]
    c = select.choose(space, m, ("P",))
    assert c.nodes == ("GPU-1", "GPU-2") and "2 different GPUs" in c.note


def test_each_launch_shape_gets_its_best_value_and_the_picks_regret(space):
    shapes = []   # shape 0 (small grid) is fastest at P=1, shape 1 at P=3; P=2 is best overall
    for tag, p, small, big in [("a", 1, 10, 100), ("b", 2, 12, 90), ("c", 3, 20, 85)]:
        r = rows([(tag, p, [small] * 3), (tag, p, [big] * 3)])
        r["grid"] = [f"{64 // p}x1x1", f"{512 // p}x1x1"]
        shapes.append(r)
    c = select.choose(space, pd.concat(shapes), ("P",))
    assert c.values == {"P": 2}
    small, big = c.shapes
    assert (small.index, small.best, small.regret) == (0, {"P": 1}, pytest.approx(0.2))
    assert (big.index, big.best, big.regret, big.shape) == (1, {"P": 3}, pytest.approx(90 / 85 - 1), "grid 256x1x1 block 64x1x1")


# ---------------------------------------------------------------------------
# the race, on recorded samples
# ---------------------------------------------------------------------------


def lane(kernel, blocks, default):
    entrants = tuple(Entrant(f"B{b}", b, b == default) for b in blocks)
    return race.Lane(("P",), (kernel,), entrants, {f"B{b}": {"P": b} for b in blocks})


def replay(kernel, samples: dict[str, list[float]]):
    """run(tag): one Measurement of `kernel` whose one sample is the tag's next recorded time."""
    count = {t: 0 for t in samples}

    def run(tag):
        s = samples[tag][count[tag] % len(samples[tag])]
        count[tag] += 1
        return [Measurement(kernel, (1, 1, 1), (1, 1, 1), 1, s, s, s, s, 0.0, (s,))]
    return run


def race_plan(*lanes, budget_s=600.0, max_rounds=30):
    tags = {e.id for x in lanes for e in x.entrants}
    return race.RacePlan(lanes, {t: f"/jobs/{t}" for t in tags}, {t: "h" for t in tags}, budget_s, max_rounds)


def test_race_certifies_the_known_winner_on_recorded_samples(space):
    ln = recorded("layernorm_kernel")                 # 256 threads: 2.27 us; 128: 2.62 us; 512: 2.50 us
    x = lane("layernorm_kernel", (128, 256, 512), default=128)
    p = race_plan(x)
    raced = race.race(p, race.each_run(replay("layernorm_kernel", {f"B{b}": ln[b] for b in (128, 256, 512)})))
    res = raced.results[("P",)]
    assert res.certified and res.pick == "B256" and res.rounds == 9 and res.margin == pytest.approx(0.0972, abs=0.01)
    certs = certify.certifications(p, {"lanes": [{"result": res.to_dict()}], "node": {"host": "h100"}})
    m = rows([("B128", 1, ln[128]), ("B256", 2, ln[256]), ("B512", 3, ln[512])])
    c = select.choose(space, m, ("P",), certification=certs[("P",)])
    assert c.values == {"P": 256} and c.certified and c.beyond_noise and c.verdict == "faster"
    assert c.noise_source == "race" and c.margin_ci_low > 0 and "certified" in c.note


def test_race_reports_a_tie_on_samples_from_one_distribution_and_picks_the_default(space):
    r = recorded("residual_kernel")
    pool = r[256] + r[512]                             # the same 1.44-1.57 us launches at 256 and 512 threads
    rng = np.random.default_rng(7)
    samples = {f"B{b}": list(rng.choice(pool, 30)) for b in (128, 256, 512)}
    x = lane("residual_kernel", (128, 256, 512), default=512)
    p = race_plan(x)
    res = race.race(p, race.each_run(replay("residual_kernel", samples))).results[("P",)]
    assert res.status == "tie" and res.stopped == "max_rounds" and res.rounds == 30
    assert set(res.tied) == {"B128", "B256", "B512"} and res.pick == "B512" and res.rule == "default in tied set"
    cert = certify.certifications(p, {"lanes": [{"result": res.to_dict()}]})[("P",)]
    m = rows([(f"B{b}", b, samples[f"B{b}"][:5]) for b in (128, 256, 512)])
    c = select.choose(space, m, ("P",), certification=cert)
    assert c.values == {"P": 512} and not c.certified and c.verdict == "tie" and not c.beyond_noise
    assert res.leader != "B512" and c.runner_up.values == {"P": int(res.leader[1:])}   # the leader, against the pick
    assert c.margin <= 0 and (c.margin_ci_low is None or c.margin_ci_low < 0) and \
        (c.margin_ci_high is None or c.margin_ci_high > 0)
    assert "tied P=" in c.note and "default in tied set" in c.note


@pytest.mark.parametrize("budget_s,rounds", [(2.0, 2), (7.0, 7)])
def test_a_race_that_ends_before_it_could_decide_says_nothing_and_the_sweeps_pick_stands(space, budget_s, rounds):
    """Two entrants decide nothing before round 9 (the Bonferroni-corrected signed rank; a budget stop, the
    one unscheduled look, could from round 8), so a budget spent sooner leaves a "tie" that tested
    nothing: the sweep's pick stands, not the tie rule's."""
    ln = recorded("layernorm_kernel")
    x = lane("layernorm_kernel", (128, 256), default=None)
    p = race_plan(x, budget_s=budget_s)
    t = iter(range(100))
    res = race.race(p, race.each_run(replay("layernorm_kernel", {f"B{b}": ln[b] for b in (128, 256)})),
                    clock=lambda: next(t))
    cert = certify.certifications(p, {"lanes": [{"result": res.results[("P",)].to_dict()}]})[("P",)]
    assert cert.status == "tie" and cert.rounds == rounds and cert.decisive_from == 9 and cert.verdict == "unknown"
    assert cert.rule == "fewest threads"
    c = select.choose(space, rows([("B128", 1, ln[128]), ("B256", 2, ln[256])]), ("P",), certification=cert)
    assert c.values == {"P": 2} and c.noise_source == "iterations" and c.verdict == "faster"   # not fewest threads
    assert c.certification == cert and not c.certified and f"the race ran {rounds} round(s)" in c.note


def test_rounds_run_each_job_once_rotated_and_only_for_groups_still_racing():
    ln, ge = recorded("layernorm_kernel"), recorded("gelu_kernel")
    blocks = {"j1": (128, 128), "j2": (256, 128), "j3": (512, 128), "j4": (256, 1024)}   # (layernorm, gelu)
    a = race.Lane(("L",), ("layernorm_kernel",), tuple(Entrant(j, blocks[j][0]) for j in ("j1", "j2", "j3")),
                  {j: {"L": blocks[j][0]} for j in ("j1", "j2", "j3")})
    b = race.Lane(("G",), ("gelu_kernel",), (Entrant("j3", 128), Entrant("j4", 1024)), {"j3": {"G": 128}, "j4": {"G": 1024}})
    calls = []

    def run(tag):
        i = calls.count(tag) % 5
        calls.append(tag)
        lb, gb = blocks[tag]
        return [Measurement("layernorm_kernel", (1, 1, 1), (lb, 1, 1), 1, 0, 0, 0, 0, 0, (ln[lb][i],)),
                Measurement("gelu_kernel", (1, 1, 1), (gb, 1, 1), 1, 0, 0, 0, 0, 0, (ge[gb][i],))]

    raced = race.race(race_plan(a, b, max_rounds=100), race.each_run(run))
    assert calls[:8] == ["j1", "j2", "j3", "j4", "j2", "j3", "j4", "j1"]     # each job once a round, rotated by one
    g, l = raced.results[("G",)], raced.results[("L",)]
    assert g.certified and g.pick == "j3" and l.certified and l.pick == "j2"
    assert g.rounds == 9 and l.rounds == raced.rounds == 12                  # two entrants separate sooner than three
    # (at 100 rounds at most: the more looks and comparisons, the smaller each interval's share of alpha)
    assert len(calls) == 4 * 9 + 3 * 3 and "j4" not in calls[36:]            # j4 raced only for G


def test_an_entrant_beaten_beyond_the_noise_stops_running_while_the_others_race_on():
    r = recorded("residual_kernel")
    pool = r[256] + r[512]                             # B256 and B512: one distribution, never separated
    rng = np.random.default_rng(11)
    samples = {"B256": list(rng.choice(pool, 30)), "B512": list(rng.choice(pool, 30)),
               "B128": [1.2 * x for x in rng.choice(pool, 30)]}        # 20% slower: out at the first look that can tell
    calls = []
    run = replay("residual_kernel", samples)
    res = race.race(race_plan(lane("residual_kernel", (128, 256, 512), default=512)),
                    race.each_run(lambda tag: calls.append(tag) or run(tag))).results[("P",)]
    assert res.status == "tie" and res.rounds == 30 and set(res.tied) == {"B256", "B512"} and res.pick == "B512"
    assert calls.count("B128") == 9 and calls.count("B256") == calls.count("B512") == 30
    assert res.comparisons["B128"].verdict == "faster" and res.medians["B128"] > res.medians["B512"]


def _two_group_race(tmp_path, **space_overrides):
    from sweep.space import target
    from sweep.records import Best

    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(toy_space_dict(**space_overrides), sort_keys=False))
    space = target.load(path)
    alpha = race.Lane(("ALPHA_BLOCK",), ("alpha_kernel",),
                      (Entrant("j1", 128), Entrant("j2", 64), Entrant("j3", 1024), Entrant("j4", 256, True)),
                      {"j1": {"ALPHA_BLOCK": 128}, "j2": {"ALPHA_BLOCK": 64}, "j3": {"ALPHA_BLOCK": 1024},
                       "j4": {"ALPHA_BLOCK": 256}})
    beta = race.Lane(("BETA_X", "BETA_Y"), ("beta_kernel",),
                     (Entrant("j5", 256), Entrant("j6", 32, True)),
                     {"j5": {"BETA_X": 64, "BETA_Y": 4}, "j6": {"BETA_X": 32, "BETA_Y": 1}})
    p = race.RacePlan((alpha, beta), {f"j{i}": f"/jobs/j{i}" for i in range(1, 7)}, {}, 30.0, 30)
    return space, Best("toy", (), {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4}), p


def test_combined_configurations_race_every_group_at_once_one_program_per_rank(tmp_path):
    space, best, p = _two_group_race(tmp_path)
    ranks = dict(race_combined.combined(space, best, p))
    assert ranks == {"1": {"ALPHA_BLOCK": 128, "BETA_X": 64, "BETA_Y": 4},
                     "2": {"ALPHA_BLOCK": 64, "BETA_X": 64, "BETA_Y": 4},      # beta has no 2nd: its pick
                     "3": {"ALPHA_BLOCK": 1024, "BETA_X": 64, "BETA_Y": 4},
                     "default": {"ALPHA_BLOCK": 256, "BETA_X": 32, "BETA_Y": 1}}
    jobs = {r: (f"c{r}", f"/jobs/c{r}", f"h{r}") for r in ranks}
    shared = race_combined.combined_plan(p, jobs)
    assert len(p.tags()) == 6 and shared.tags() == ["c1", "c2", "c3", "cdefault"]
    a, b = shared.lanes
    assert [e.id for e in a.entrants] == ["c1", "c2", "c3", "cdefault"] and a.values["c3"] == {"ALPHA_BLOCK": 1024}
    assert [(e.id, e.threads, e.is_default) for e in b.entrants] == [("c1", 256, False), ("cdefault", 32, True)]
    assert b.values == {"c1": {"BETA_X": 64, "BETA_Y": 4}, "cdefault": {"BETA_X": 32, "BETA_Y": 1}}
    assert shared.hashes == {"c1": "h1", "c2": "h2", "c3": "h3", "cdefault": "hdefault"}


def test_a_combination_that_breaks_a_constraint_leaves_each_group_to_race_its_own_jobs(tmp_path):
    space, best, p = _two_group_race(tmp_path, constraints=["ALPHA_BLOCK * BETA_X <= 32768"])
    assert race_combined.combined(space, best, p) is None                      # 1024 x 64 breaks it
    one = race.RacePlan(p.lanes[:1], p.jobs, {}, 30.0, 30)
    assert race_combined.combined(space, best, one) is None                    # one group: nothing to share


# ---------------------------------------------------------------------------
# end to end on the toy target (CPU programs)
# ---------------------------------------------------------------------------


def raced_toy_sweep(root: Path, iterations: int, budget_s: float):
    """The toy, three rows, at `iterations` timed iterations per run, raced: (space path, jobs, results,
    RunSummary)."""
    d = toy_space_dict(strategy="tuples", tuples={"columns": ["ALPHA_BLOCK", "BETA_X"],
                                                  "rows": [[64, 32], [128, 64], [256, 32]]},
                       run={"iterations": iterations}, certify={"budget_s": budget_s})
    d["parameters"]["BETA_Y"] = {"tag": "B", "values": [4], "default": 4, "kernels": ["beta_kernel"]}
    return run_toy_sweep(root, d)


@pytest.fixture(scope="module")
def one_iteration_sweep(tmp_path_factory):
    """The toy at one timed iteration per run, raced."""
    return raced_toy_sweep(tmp_path_factory.mktemp("trust"), 1, 30)


def test_a_one_iteration_program_is_run_five_times_and_its_runs_kept(one_iteration_sweep):
    _, jobs, results, _ = one_iteration_sweep
    r = JobResult.from_dict(json.loads((jobs / "toy" / "A128_B64x4" / "result.json").read_text()))
    assert r.sampling.runs == 5 and r.sampling.source == "runs" and r.sampling.adaptive
    assert r.sampling.stopped["reason"] == "converged" and all(m.runs == (1,) * 5 for m in r.measurements)
    m = pd.read_parquet(results / "toy" / "measurements.parquet")
    assert set(m["runs"]) == {5} and all(len(s) == 5 for s in m["iter_total_ns"])
    configs = pd.read_parquet(results / "toy" / "configs.parquet")
    assert set(configs[configs["role"] == "sweep"]["stop_reason"]) == {"converged"}


def test_toy_race_certifies_both_groups_and_best_json_carries_it(one_iteration_sweep):
    _, jobs, results, summary = one_iteration_sweep
    by = {c.macros: c for c in summary.best.choices}
    alpha, beta = by[("ALPHA_BLOCK",)], by[("BETA_X", "BETA_Y")]
    assert alpha.values == {"ALPHA_BLOCK": 128} and beta.values == {"BETA_X": 64, "BETA_Y": 4}
    assert alpha.certified and beta.certified and alpha.noise_source == "race"
    # rank 1 (A128, B64x4) and the defaults (A256, B32x4) are rows the sweep measured; rank 2 combines
    # alpha's second (64) with beta's pick (64x4), a configuration no row has: a job of its own
    assert alpha.certification.host and {e["tag"] for e in alpha.certification.entrants} == {
        "A128_B64x4", "entrant_A64_B64x4", "A256_B32x4"}
    configs = pd.read_parquet(results / "toy" / "configs.parquet")
    assert configs.set_index("tag").loc["entrant_A64_B64x4", "role"] == "entrant"
    assert all(x.tag != "entrant_A64_B64x4" for c in summary.best.choices for x in c.candidates)
    best = json.loads((results / "toy" / "best.json").read_text())
    assert best["schema"] == "sweep-best/4" and best["choices"][0]["certification"]["status"] == "certified"
    page = (results / "toy" / "report.html").read_text()
    assert "certified (9 rounds)" in page and "Race median" in page
    outcome = certify.latest_outcome(jobs / "toy")
    assert outcome["rounds"] == 9 and outcome["runs"] == 27       # 3 jobs a round; one race for both groups


def test_collect_again_keeps_the_race_without_running_it(one_iteration_sweep):
    _, jobs, results, _ = one_iteration_sweep
    (outcome,) = (jobs / "toy" / certify.RACES).glob(f"*/{race.OUTCOME}")
    stamp = outcome.stat().st_mtime_ns
    best, _ = manage.recollect("toy", jobs, results, report=False)
    assert all(c.certified for c in best.choices)
    assert outcome.stat().st_mtime_ns == stamp


def test_a_job_drops_a_throttled_run_measures_again_and_records_the_clocks(one_iteration_sweep, monkeypatch):
    from tests.node.test_sampling import FakeReader

    _, jobs, _, _ = one_iteration_sweep
    reader = FakeReader([1980.0, 1000.0, 1100.0])        # the fingerprint's reading, then a throttled first run
    monkeypatch.setattr(clocks, "reader", lambda: reader)
    monkeypatch.setattr(clocks, "sleep", lambda s: None)
    r = job_mod.Job(jobs / "toy" / "A64_B32x4").run("all")
    assert r.status == "ok" and r.sampling.throttled_runs == 1 and r.sampling.runs == 5
    assert r.sampling.throttled_samples == 1 and r.sampling.clocks[0]["sm_mhz"] == 1980.0
    assert r.env["gpu_uuid"] == "GPU-1" and r.env["start_sm_mhz"] == 1980.0 and r.env["default_sm_mhz"] == 1980.0


def test_a_race_costing_more_than_its_cap_races_nothing_and_says_which_cap_s_allows_it(tmp_path, monkeypatch, capsys):
    if __import__("shutil").which("nvcc") is None:
        pytest.skip("nvcc not installed")
    d = toy_space_dict(strategy="tuples", tuples={"columns": ["ALPHA_BLOCK", "BETA_X"],
                                                  "rows": [[64, 32], [128, 64], [256, 32]]},
                       certify={"budget_share": 0.001, "cap_s": 0.001})
    d["parameters"]["BETA_Y"] = {"tag": "B", "values": [4], "default": 4, "kernels": ["beta_kernel"]}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    summary = pipeline.run(path, pipeline.Options(executor="debug", jobs_root=tmp_path / "jobs",
                                                  results_root=tmp_path / "results", poll_s=0.05))
    err = capsys.readouterr().err
    assert "certify: not racing: certifying takes 9 rounds" in err and "certify: {cap_s: " in err
    assert not (tmp_path / "jobs" / "toy" / certify.RACES).exists()
    assert not list((tmp_path / "jobs" / "toy").glob("entrant_*"))       # no entrant built for a race not run
    assert summary.best.choices and all(c.certification is None for c in summary.best.choices)
    assert all(c.not_raced.startswith("would cost ~") for c in summary.best.choices)


# ---------------------------------------------------------------------------
# lockstep: what a race costs, and the fallback for a program that cannot take turns
# ---------------------------------------------------------------------------


def _lockstep_plan(budget_s: float, backend: str = "nsys"):
    from sweep.decide.collect import Collected

    tags = ["a", "b", "c", "d"]
    cf = pd.DataFrame({"tag": tags, "role": "sweep", "status": "ok", "profile_s": [5.3, 5.4, 6.0, 5.5], "runs": 1,
                       "backend": backend, "noise_source": "iterations"})
    m = pd.DataFrame({"tag": tags, "workload": "", "total_median_ns": 11.4e6})
    entrants = tuple(Entrant(t, 32 * (i + 1)) for i, t in enumerate(tags))
    lane_ = race.Lane(("P",), ("k",), entrants, {t: {"P": i} for i, t in enumerate(tags)})
    p = race.RacePlan((lane_,), {t: f"/jobs/{t}" for t in tags}, {}, budget_s, 12, lockstep=True)
    return p, Collected(cf, m, None)


def test_a_lockstep_race_costs_a_start_up_a_batch_of_rounds_and_its_turns_whatever_the_sweeps_profiler():
    p, c = _lockstep_plan(25.0)
    start_s, round_s = race_cost.lockstep_costs(p, c)
    assert start_s == pytest.approx(5.3 * race_cost.PROGRAM_SHARE["nsys"])        # the program, not nsys around it
    assert round_s == pytest.approx(4 * 3 * (0.0114 + race_cost.TURN_OVERHEAD_S))  # 4 programs, 3 turns each
    batch = start_s * (1 + race_cost.PROCESS_START_SHARE * 15)                     # 16 processes: 4 rounds of 4
    assert race_cost.lockstep_seconds(p, c, 12) == pytest.approx(3 * batch + 12 * round_s)
    assert race_cost.needed_s(p, c) == race_cost.lockstep_seconds(p, c, 9)           # 4 entrants decide from round 9
    assert race_cost.affordable_rounds(p, c, 4) == 12                              # max_rounds
    short, _ = _lockstep_plan(10.0)
    assert race_cost.affordable_rounds(short, c, 4) == 7                           # the 2nd batch fits 3 rounds


def test_lockstep_races_side_by_side_share_the_nodes_start_ups_so_start_bound_parts_are_no_quicker():
    p, c = _lockstep_plan(25.0)
    half = [dataclasses.replace(p, lanes=(dataclasses.replace(p.lanes[0], entrants=p.lanes[0].entrants[:2]),)),
            dataclasses.replace(p, lanes=(dataclasses.replace(p.lanes[0], entrants=p.lanes[0].entrants[2:]),))]
    assert race_cost.side_by_side_s([p], c) == race_cost.needed_s(p, c)
    # two races of two programs each start 4 processes a round on the node, as the one race of four does
    first = race_cost.first_certifiable_round(2, p.max_rounds)
    two = race_cost.side_by_side_s(half, c)
    assert two == pytest.approx(max(race_cost.lockstep_seconds(h, c, first, beside=2.0) for h in half))
    assert race_cost.lockstep_seconds(half[0], c, first, beside=2.0) > race_cost.lockstep_seconds(half[0], c, first)
    assert race_cost.side_by_side_s([dataclasses.replace(p, lockstep=False)], c) is None     # whole runs: not modelled


def test_a_lockstep_start_up_leaves_out_what_the_sweeps_runs_waited_for_other_programs_gpu_work():
    p, c = _lockstep_plan(25.0, backend="cupti")
    before, _ = race_cost.lockstep_costs(p, c)
    c.configs["gpu_wait_s"] = [4.0, 1.0, None, 0.2]     # overlap mode: queued behind other programs at the token
    after, _ = race_cost.lockstep_costs(p, c)
    assert before == pytest.approx(5.3 * race_cost.PROGRAM_SHARE["cupti"])
    assert after == pytest.approx(1.3 * race_cost.PROGRAM_SHARE["cupti"])     # a: 5.3 s less its 4 s of waiting
    assert list(race_cost.own_seconds_per_run(c.configs)) == pytest.approx([1.3, 4.4, 6.0, 5.3])


def test_a_race_goes_in_lockstep_only_where_every_entrant_measured_per_iteration_samples(write_space):
    from sweep.space import target

    _, c = _lockstep_plan(25.0)
    space = target.load(write_space())
    assert certify.in_lockstep(space, c, ["a", "b"])
    c.configs.loc[c.configs["tag"] == "b", "noise_source"] = "runs"          # a one-iteration program, run 5 times
    assert not certify.in_lockstep(space, c, ["a", "b"]) and certify.in_lockstep(space, c, ["a", "c"])
    off = target.load(write_space("off.yaml", certify={"lockstep": False}))
    assert not certify.in_lockstep(off, c, ["a", "c"])


@pytest.fixture(scope="module")
def multi_iteration_sweep(tmp_path_factory):
    """The toy at 5 timed iterations per run, raced."""
    return raced_toy_sweep(tmp_path_factory.mktemp("lockstep"), 5, 60)


def test_a_program_that_cannot_take_turns_is_raced_a_run_a_round_and_the_race_says_why(multi_iteration_sweep):
    """The toy's programs time their iterations without CUDA (and without NVTX ranges): planned in
    lockstep, since they sampled per iteration, they end before any turn; the race runs each a run a
    round instead, on what is left of its budget, and race.json names the reason."""
    _, jobs, _, summary = multi_iteration_sweep
    outcome = certify.latest_outcome(jobs / "toy")
    plan = json.loads(next((jobs / "toy" / certify.RACES).glob(f"*/{race.PLAN}")).read_text())
    assert plan["lockstep"] and plan["turns"] == 3
    assert outcome["mode"] == "runs" and outcome["runs"] >= 2 * outcome["rounds"]
    assert "cannot take turns" in outcome["fallback"] or "could not be built" in outcome["fallback"]
    assert all(c.certification is not None and 0 < c.certification.rounds <= outcome["rounds"]
               for c in summary.best.choices)
