"""Evidence statistics (sweep.stats): summaries, noise basis, comparisons, stopping rule, races.

All CPU, all seeded: synthetic timings in ns drawn with numpy's default_rng.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from sweep.core.errors import SweepError
from sweep.stats import (MIN_SAMPLES_FOR_NOISE, Entrant, Race, StoppingRule, compare, contenders, default_repeats,
                         drop_throttled, look_rounds, noise_samples, sample_until, summarize, tie_break)
from sweep.stats.compare import (_mann_whitney_cdf, _normal_tail_count, _signed_rank_cdf, _tail_count,
                                 mann_whitney_count, signed_rank_count)


def lognormal(rng: np.random.Generator, median_ns: float, noise: float, n: int) -> np.ndarray:
    """n times around median_ns with relative (log-scale) standard deviation `noise`."""
    return median_ns * np.exp(noise * rng.standard_normal(n))


def as_json(obj) -> dict:
    """obj.to_dict() after a strict JSON round trip (no NaN or Infinity allowed)."""
    return json.loads(json.dumps(obj.to_dict(), allow_nan=False))


# --- samples: summary, noise basis, throttling ------------------------------------------------------------------

def test_summarize_matches_hand_computed_quartiles_for_odd_count():
    s = summarize([4.0, 1.0, 3.0, 2.0, 10.0])   # sorted 1 2 3 4 10
    assert (s.n, s.median, s.q1, s.q3, s.iqr, s.min, s.max) == (5, 3.0, 2.0, 4.0, 2.0, 1.0, 10.0)
    assert s.noise == pytest.approx(2.0 / 3.0)


def test_summarize_interpolates_quartiles_linearly_for_even_count():
    s = summarize([1.0, 2.0, 3.0, 4.0])  # type 7: q1 at rank 1.75, q3 at rank 3.25
    assert (s.median, s.q1, s.q3) == (2.5, 1.75, 3.25)
    assert s.iqr == 1.5 and s.noise == pytest.approx(0.6)


@pytest.mark.parametrize("samples", [[100.0], [100.0, 250.0]])
def test_summarize_reports_unknown_noise_below_three_samples(samples):
    s = summarize(samples)
    assert s.noise is None and s.iqr is None and s.q1 is None and not s.noise_known
    assert s.n == len(samples) and s.median == float(np.median(samples))
    assert as_json(s)["noise"] is None


@pytest.mark.parametrize("bad", [[], [1.0, math.nan, 2.0], [1.0, math.inf, 2.0]])
def test_summarize_rejects_empty_or_non_finite_samples(bad):
    with pytest.raises(ValueError):
        summarize(bad)


@pytest.mark.parametrize("iterations, repeats", [(1, 5), (2, 3), (3, 1), (100, 1)])
def test_default_repeats_gives_a_short_program_at_least_five_samples(iterations, repeats):
    assert default_repeats(iterations) == repeats
    if iterations < MIN_SAMPLES_FOR_NOISE:
        assert iterations * repeats >= 5


@pytest.mark.parametrize("runs, source, n", [
    ([[10.0, 11.0, 12.0, 10.5]], "iterations", 4),      # one run, enough iterations
    ([[10.0], [11.0], [12.0], [10.5], [9.9]], "runs", 5),  # one-iteration program run 5 times
    ([[10.0, 11.0], [12.0, 10.5]], "runs", 4),          # two-iteration program run twice: pooled
    ([[10.0, 11.0]], "unknown", 2),                     # one run of two iterations: noise unknown
    ([[10.0], [11.0]], "unknown", 2),
])
def test_noise_samples_names_where_the_noise_comes_from(runs, source, n):
    ns = noise_samples(runs)
    assert ns.source == source and len(ns.samples_ns) == n and ns.runs == len(runs)
    assert (ns.summary().noise is None) == (source == "unknown")
    assert as_json(ns)["source"] == source


def test_drop_throttled_drops_samples_below_75_percent_of_the_default_clock():
    samples = [100.0, 130.0, 101.0, 129.0, 99.0]
    clocks_mhz = [1980.0, 1400.0, 1485.0, 1484.9, math.nan]   # 75% of 1980 MHz is 1485 MHz
    out = drop_throttled(samples, clocks_mhz, 1980.0)
    assert out.samples == (100.0, 101.0, 99.0)   # at the threshold is kept; an unread clock is kept
    assert (out.dropped, out.kept, out.threshold) == (2, 3, 1485.0)
    assert as_json(out)["dropped"] == 2


def test_drop_throttled_rejects_one_reading_short():
    with pytest.raises(ValueError, match="one SM clock reading per sample"):
        drop_throttled([1.0, 2.0], [1980.0], 1980.0)


# --- compare: never beyond noise without evidence --------------------------------------------------------------

@pytest.mark.parametrize("n_best, n_other", [(1, 1), (1, 5), (2, 2), (5, 2), (2, 50)])
def test_compare_is_unknown_never_beyond_noise_with_fewer_than_three_samples_a_side(n_best, n_other):
    best, other = [100.0] * n_best, [1000.0] * n_other   # 10x apart, yet no measured noise on one side
    c = compare(best, other)
    assert c.verdict == "unknown" and not c.beyond_noise
    assert c.ci_low is None and c.ci_high is None
    assert c.margin == pytest.approx(9.0)   # the point estimate is still reported


@pytest.mark.parametrize("rounds", [1, 2])
def test_compare_paired_is_unknown_with_fewer_than_three_rounds(rounds):
    c = compare([100.0] * rounds, [300.0] * rounds, paired=True)
    assert c.verdict == "unknown" and not c.beyond_noise


def test_compare_three_against_three_is_a_tie_even_when_they_do_not_overlap():
    # a disjoint 3 v 3 ordering happens 1 time in 10 with no difference at all: not 95% evidence
    c = compare([100.0, 101.0, 99.0], [110.0, 111.0, 109.0])
    assert c.verdict == "tie" and c.ci_low == -math.inf and c.ci_high == math.inf
    assert as_json(c)["ci_low"] is None


def test_compare_separates_a_ten_percent_difference_with_five_samples_a_side():
    best, other = [100.0, 101.0, 99.0, 100.0, 102.0], [110.0, 111.0, 109.0, 110.0, 112.0]
    c = compare(best, other)
    assert c.verdict == "faster" and c.beyond_noise
    assert c.margin == pytest.approx(0.10, abs=0.005) and 0 < c.ci_low < c.margin < c.ci_high
    assert compare(other, best).verdict == "slower"


def test_compare_margin_is_relative_and_does_not_depend_on_the_unit():
    rng = np.random.default_rng(1)
    best, other = lognormal(rng, 100.0, 0.01, 12), lognormal(rng, 103.0, 0.01, 12)
    ns, ms = compare(best, other), compare(best / 1e6, other / 1e6)
    assert ns.margin == pytest.approx(ms.margin) and ns.ci_low == pytest.approx(ms.ci_low)


def test_compare_on_one_distribution_is_beyond_noise_about_alpha_of_the_time():
    rng = np.random.default_rng(2)
    hits = sum(compare(lognormal(rng, 100.0, 0.01, 10), lognormal(rng, 100.0, 0.01, 10)).beyond_noise
               for _ in range(400))
    assert hits <= 32   # alpha 5% of 400 is 20; exact test, so well within 8%


@pytest.mark.parametrize("m, n", [(3, 3), (3, 5), (4, 6), (6, 6)])
def test_mann_whitney_exact_distribution_matches_enumeration(m, n):
    counts = np.zeros(m * n + 1)
    for xs in itertools.combinations(range(m + n), m):   # positions of the x's among the m+n ranks
        counts[sum(sum(1 for y in set(range(m + n)) - set(xs) if y < x) for x in xs)] += 1
    assert _mann_whitney_cdf(m, n) == pytest.approx(np.cumsum(counts) / counts.sum())


@pytest.mark.parametrize("n", [3, 5, 8])
def test_signed_rank_exact_distribution_matches_enumeration(n):
    counts = np.zeros(n * (n + 1) // 2 + 1)
    for signs in itertools.product((0, 1), repeat=n):
        counts[sum(r for r, s in zip(range(1, n + 1), signs) if s)] += 1
    assert _signed_rank_cdf(n) == pytest.approx(np.cumsum(counts) / counts.sum())


def test_mann_whitney_normal_approximation_agrees_with_exact_beyond_the_switch():
    exact = _tail_count(_mann_whitney_cdf(51, 51), 0.025)
    assert mann_whitney_count(51, 51, 0.025) == _normal_tail_count(51 * 51 / 2, 51 * 51 * 103 / 12, 0.025) == exact


# --- stopping rule ----------------------------------------------------------------------------------------------

def stream(rng: np.random.Generator, sample, per_sample_s: float = 0.01):
    """take() and a fake clock that advances per_sample_s per sample."""
    clock = {"t": 0.0}

    def take() -> float:
        clock["t"] += per_sample_s
        return float(sample(rng))
    return take, (lambda: clock["t"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stopping_rule_converges_on_a_tight_stream(seed):
    take, clock = stream(np.random.default_rng(seed), lambda r: 1000.0 * (1 + 0.001 * r.standard_normal()))
    samples, stopped = sample_until(StoppingRule(), take, clock)
    assert stopped.reason == "converged" and stopped.noise < 0.005
    assert stopped.samples == len(samples) >= 5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stopping_rule_plateaus_on_heavy_noise_before_the_budget(seed):
    rule = StoppingRule(max_samples=2000, budget_s=20.0)
    take, clock = stream(np.random.default_rng(seed), lambda r: 1000.0 * (1 + 0.05 * r.standard_normal()))
    samples, stopped = sample_until(rule, take, clock)
    assert stopped.reason == "plateau"
    assert stopped.noise == pytest.approx(0.067, rel=0.3)   # IQR of 5% normal noise is 6.7%
    assert len(samples) < rule.max_samples and stopped.elapsed_s < rule.budget_s


def drifting(rng: np.random.Generator):
    """A stream with 1% noise whose level climbs 0.2% a sample: its noise estimate grows and never settles."""
    i = 0

    def take() -> float:
        nonlocal i
        i += 1
        return 1000.0 * (1 + 0.002 * i) * (1 + 0.01 * rng.standard_normal())
    return take


@pytest.mark.parametrize("rule, reason", [
    (StoppingRule(max_samples=2000, budget_s=3.0), "budget"),
    (StoppingRule(max_samples=300, budget_s=60.0), "max_samples"),
])
def test_stopping_rule_stops_at_its_budget_when_the_noise_keeps_growing(rule, reason):
    take_one = drifting(np.random.default_rng(3))
    take, clock = stream(np.random.default_rng(3), lambda r: take_one())
    samples, stopped = sample_until(rule, take, clock)
    assert stopped.reason == reason and stopped.noise > 0.1
    if reason == "budget":
        assert stopped.elapsed_s >= rule.budget_s and len(samples) < rule.max_samples
    else:
        assert len(samples) == rule.max_samples and stopped.elapsed_s < rule.budget_s


def test_stopping_rule_does_not_stop_converged_before_min_samples():
    rule = StoppingRule(min_samples=5)
    assert rule.check([100.0, 100.0, 100.0], elapsed_s=0.1) is None   # noise 0, but only 3 samples
    assert rule.check([100.0] * 5, elapsed_s=0.1).reason == "converged"


def test_stopping_rule_stops_at_budget_even_with_unknown_noise():
    stopped = StoppingRule(budget_s=1.0).check([100.0], elapsed_s=1.5)
    assert stopped.reason == "budget" and stopped.noise is None and stopped.samples == 1
    assert as_json(stopped) == {"samples": 1, "noise": None, "reason": "budget", "elapsed_s": 1.5}


def test_stopping_rule_rejects_bad_settings_naming_each():
    with pytest.raises(SweepError, match=r"max_noise=0 .*min_samples=2"):
        StoppingRule(max_noise=0, min_samples=2)


# --- race certification -----------------------------------------------------------------------------------------

ENTRANTS = (Entrant("A", 256, is_default=True), Entrant("B", 128), Entrant("C", 512), Entrant("D", 64))


@pytest.mark.parametrize("default_ns, ids", [(1100.0, ["B", "C", "D", "A"]), (1001.0, ["B", "C", "A"])])
def test_contenders_are_the_three_fastest_plus_the_default(default_ns, ids):
    cands = (*ENTRANTS, Entrant("E", 32))
    medians = {"A": default_ns, "B": 1000.0, "C": 1000.5, "D": 1002.0, "E": 1050.0}
    assert [e.id for e in contenders(cands, medians)] == ids


def run_race(race: Race, medians_ns: dict[str, float], seed: int, noise: float = 0.005, drift: float = 0.0):
    """Feed interleaved rounds until the race stops; drift: a per-round factor shared by all entrants."""
    rng = np.random.default_rng(seed)
    while True:
        shared = math.exp(drift * rng.standard_normal())
        times = {i: m * shared * math.exp(noise * rng.standard_normal()) for i, m in medians_ns.items()}
        result = race.add_round({i: times[i] for i in race.alive}, elapsed_s=race.rounds * 0.1)
        if result is not None:
            return result


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_race_certifies_a_three_percent_faster_candidate_with_half_percent_noise(seed):
    race = Race(ENTRANTS)
    r = run_race(race, {"A": 1000.0, "B": 970.0, "C": 1000.0, "D": 1005.0}, seed)
    assert r.status == "certified" and r.pick == r.leader == "B" and r.rule == "certified" and r.tied == ("B",)
    assert r.runner_up in ("A", "C") and r.stopped == "separated" and r.rounds < race.max_rounds
    assert r.margin == pytest.approx(1000 / 970 - 1, abs=0.01) and 0 < r.ci_low < r.margin < r.ci_high
    assert all(c.verdict == "faster" for c in r.comparisons.values())


def test_race_on_one_distribution_without_an_equivalence_margin_ties_at_its_budget_and_rarely_certifies_falsely():
    results = [run_race(Race(ENTRANTS, equivalence=None), dict.fromkeys("ABCD", 1000.0), seed) for seed in range(20)]
    assert sum(r.certified for r in results) <= 1
    for r in (r for r in results if not r.certified):
        assert r.stopped == "max_rounds" and r.rounds == 100
        assert r.pick == "A" and r.rule == "default in tied set" and len(r.tied) >= 2


def test_race_on_one_distribution_stops_as_soon_as_the_tie_is_shown_within_one_percent():
    results = [run_race(Race(ENTRANTS), dict.fromkeys("ABCD", 1000.0), seed) for seed in range(20)]
    assert sum(r.certified for r in results) <= 1
    for r in (r for r in results if not r.certified):
        assert r.stopped == "equivalent" and r.status == "tie" and r.rounds in Race(ENTRANTS).looks and r.rounds < 30
        assert r.pick == "A" and r.rule == "default in tied set" and len(r.tied) == 4
        assert all(-0.01 < c.ci_low and c.ci_high < 0.01 for c in r.comparisons.values())


def test_noise_too_wide_to_show_one_percent_keeps_a_tied_race_running_to_its_budget():
    r = run_race(Race(ENTRANTS, max_rounds=30), dict.fromkeys("ABCD", 1000.0), seed=3, noise=0.02)
    assert r.stopped == "max_rounds" and r.rounds == 30


@pytest.mark.parametrize("seed", range(5))
def test_a_two_percent_gap_is_never_called_equivalent(seed):
    r = run_race(Race(ENTRANTS), {"A": 1000.0, "B": 1000.0, "C": 1020.0, "D": 1020.0}, seed)
    assert r.stopped != "equivalent" or not {"C", "D"} & set(r.tied)


def test_race_tie_picks_the_default_even_when_it_is_not_the_leader():
    r = run_race(Race(ENTRANTS), {"A": 1001.0, "B": 1000.0, "C": 1000.0, "D": 1100.0}, seed=4)
    assert r.status == "tie" and "A" in r.tied and "D" not in r.tied
    assert r.pick == "A" and r.rule == "default in tied set"


def test_race_tie_picks_the_fewest_threads_when_the_default_is_clearly_slower():
    r = run_race(Race(ENTRANTS), {"A": 1100.0, "B": 1000.0, "C": 1000.0, "D": 1000.0}, seed=5)
    assert r.status == "tie" and set(r.tied) == {"B", "C", "D"}
    assert r.pick == "D" and r.rule == "fewest threads"   # 64 threads


def test_an_entrant_beaten_beyond_the_noise_leaves_the_race_and_the_later_rounds_run_without_it():
    race, runs = Race(ENTRANTS), []
    rng = np.random.default_rng(7)
    medians = {"A": 1000.0, "B": 995.0, "C": 1000.0, "D": 1100.0}   # D 10% slower: out at the first look that can tell
    while (r := race.add_round({i: medians[i] * math.exp(0.005 * rng.standard_normal()) for i in race.alive},
                               elapsed_s=0.0)) is None:
        runs.append(race.alive)
    assert "D" not in race.alive and r.comparisons["D"].verdict == "faster" and r.medians["D"] > 1090
    out_at = next(k for k, alive in enumerate(runs) if "D" not in alive)
    assert out_at + 1 in race.looks and all("D" not in alive for alive in runs[out_at:])
    assert sum(map(len, runs)) < len(ENTRANTS) * len(runs)            # fewer runs than racing all four to the end


def test_a_race_certifies_once_every_other_entrant_has_left_it():
    r = run_race(Race(ENTRANTS), {"A": 1000.0, "B": 980.0, "C": 1001.0, "D": 1200.0}, seed=3, noise=0.004)
    assert r.status == "certified" and r.pick == "B" and r.tied == ("B",)
    assert all(c.verdict == "faster" for c in r.comparisons.values()) and set(r.comparisons) == {"A", "C", "D"}


def test_tie_break_takes_the_fastest_median_among_equal_thread_counts():
    tied = (Entrant("32x4", 128), Entrant("128x1", 128), Entrant("256x1", 256))
    pick, rule = tie_break(tied, {"32x4": 1002.0, "128x1": 1000.0, "256x1": 990.0})
    assert (pick.id, rule) == ("128x1", "fewest threads")


def test_race_pairs_rounds_so_shared_drift_does_not_hide_a_one_percent_win():
    r = run_race(Race(ENTRANTS), {"A": 1000.0, "B": 990.0, "C": 1000.0, "D": 1000.0}, seed=6, noise=0.002, drift=0.03)
    assert r.status == "certified" and r.pick == "B"


def test_race_of_one_iteration_captures_is_never_certified():
    race = Race(ENTRANTS, budget_s=1.0)
    r = race.add_round({"A": 1000.0, "B": 500.0, "C": 2000.0, "D": 1500.0}, elapsed_s=2.0)   # 1 sample each
    assert r.status == "tie" and r.stopped == "budget" and r.rounds == 1
    assert set(r.tied) == set("ABCD") and r.pick == "A"
    assert all(c.verdict == "unknown" for c in r.comparisons.values())


def test_race_splits_alpha_over_comparisons_and_the_looks_that_can_decide():
    assert look_rounds(5, 100, 1.25) == (5, 7, 9, 12, 15, 19, 24, 30, 38, 48, 60, 75, 94, 100)
    # each interval errs only on its lower side: two-sided at 2 x alpha / (3 comparisons x 11 looks); the
    # looks at rounds 5, 7 and 9 are not counted, as no interval at that level can lie above 0 there
    race = Race(ENTRANTS, alpha=0.05)
    assert race.pair_alpha == pytest.approx(2 * 0.05 / (11 * 3)) and race.decisive_looks == race.looks[3:]
    assert signed_rank_count(9, race.pair_alpha / 2) < 0 <= signed_rank_count(12, race.pair_alpha / 2)
    timed = Race(ENTRANTS, alpha=0.05, budget_s=60.0)   # one more look kept for a time-budget stop
    assert timed.pair_alpha == pytest.approx(2 * 0.05 / (12 * 3))


@pytest.mark.parametrize("entrants,rounds", [(2, 30), (4, 30), (4, 100)])
def test_a_race_on_one_distribution_certifies_falsely_at_most_alpha_of_the_time(entrants, rounds):
    """400 races of entrants drawn from one distribution, each round's samples offset like fresh processes
    (a heavy-tailed 3% spread, a shared drift): at most alpha (5%) may certify, with room for chance."""
    rng = np.random.default_rng(11)
    false = 0
    for _ in range(400):
        race = Race(ENTRANTS[:entrants], max_rounds=rounds, budget_s=1e9)
        while (r := race.add_round({i: 1000.0 * math.exp(0.03 * rng.standard_t(3) + 0.01 * race.rounds)
                                    for i in race.alive}, elapsed_s=0.0)) is None:
            pass
        false += r.certified
    assert false <= 0.05 * 400 + 2 * math.sqrt(0.05 * 400)


@pytest.mark.parametrize("entrants,max_rounds,first", [(2, 30, 9), (4, 30, 9), (3, 12, 9), (4, 12, 9), (2, 100, 9),
                                                       (4, 100, 12)])
def test_a_race_can_decide_from_the_first_look_where_a_leader_winning_every_round_would_separate(
        entrants, max_rounds, first):
    race = Race(ENTRANTS[:entrants], max_rounds=max_rounds, budget_s=60.0)
    assert race.decisive_looks[0] == first and set(race.decisive_looks) <= set(race.looks)
    for k in range(first):      # the leader wins every round by 10%: certified right at that look, not before
        result = race.add_round({e.id: (1000.0 if e.id == "A" else 1100.0) + k for e in race.entrants}, 0.0)
        assert (result is None) == (k < first - 1)
    assert result.certified and result.rounds == first == result.decisive and result.evidence


def test_a_race_stopped_by_its_budget_before_it_could_decide_has_no_evidence():
    race = Race(ENTRANTS[:2], budget_s=1.0)
    results = [race.add_round({"A": 1000.0 + k, "B": 1100.0 + k}, elapsed_s=0.5 * k) for k in range(3)]
    assert results[:2] == [None, None]
    result = results[-1]
    assert result.status == "tie" and result.stopped == "budget" and result.rounds == 3
    assert result.decisive == 9 and not result.evidence and result.to_dict()["decisive"] == 9


def test_race_only_evaluates_at_scheduled_looks():
    race = Race(ENTRANTS[:2])
    for k in range(6):
        result = race.add_round({"A": 1000.0 + k, "B": 500.0 + k}, elapsed_s=0.0)
        assert result is None   # looks at rounds 5 (not yet enough for the corrected level) and 9
    assert race.evaluate().status == "tie" and race.evaluate().stopped == "running"


def test_race_order_rotates_each_round():
    race = Race(ENTRANTS)
    assert race.order(0) == ("A", "B", "C", "D") and race.order(1) == ("B", "C", "D", "A")
    assert race.order(4) == race.order(0)


def test_race_rejects_a_round_missing_an_entrant_and_rounds_after_it_stopped():
    race = Race(ENTRANTS, budget_s=1.0)
    with pytest.raises(ValueError, match="one time per entrant"):
        race.add_round({"A": 1.0, "B": 1.0, "C": 1.0}, elapsed_s=0.0)
    race.add_round(dict.fromkeys("ABCD", 1.0), elapsed_s=5.0)
    with pytest.raises(ValueError, match="already stopped"):
        race.add_round(dict.fromkeys("ABCD", 1.0), elapsed_s=6.0)


def test_race_rejects_an_equivalence_margin_outside_zero_to_one():
    with pytest.raises(SweepError, match=r"equivalence=1\.5"):
        Race(ENTRANTS, equivalence=1.5)


def test_race_rejects_duplicate_ids_and_two_defaults():
    with pytest.raises(SweepError, match="each id once.*at most one"):
        Race((Entrant("A", 128, True), Entrant("A", 256, True)))


def test_race_result_to_dict_is_plain_json():
    d = as_json(run_race(Race(ENTRANTS), {"A": 1000.0, "B": 970.0, "C": 1000.0, "D": 1005.0}, seed=0))
    assert d["status"] == "certified" and d["pick"] == "B" and d["tied"] == ["B"]
    assert d["comparisons"]["A"]["method"] == "signed-rank" and d["entrants"][0] == {
        "id": "A", "threads": 256, "is_default": True}
