"""sweep.plan.learning: legality, batches, failure steering, determinism on resume, stop(), and a
short replay of a committed extract of a brute-forced space (tests/data/benchmark_spaces)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

from sweep.plan.learning import Dim, LearningSearch

DATA = Path(__file__).resolve().parents[1] / "data" / "benchmark_spaces"
BENCH = Path(__file__).resolve().parents[2] / "bench" / "data"

DIMS = [Dim("bx", (16, 32, 64, 128, 256)), Dim("by", (1, 2, 4, 8)), Dim("tile", (1, 2, 3, 4)), Dim("flag", (0, 1))]


def legal(p):
    return p["bx"] * p["by"] <= 512


def cost(p):
    return 1.0 + abs(math.log2(p["bx"]) - 6) + 0.5 * abs(math.log2(p["by"]) - 1) + 0.3 * abs(p["tile"] - 3) + 0.2 * p["flag"]


def run(search, n_evals, batch=1, f=cost, fails=lambda p: False):
    history = []
    while len(history) < n_evals:
        points = search.ask(batch)
        if not points:
            break
        for p in points:
            if fails(p):
                search.tell(p, None, failure="runtime_failed")
            else:
                search.tell(p, f(p))
            history.append(p)
    return history


def test_proposals_legal_and_distinct():
    s = LearningSearch(DIMS, legal, seed=1)
    hist = run(s, 40)
    keys = [tuple(sorted(p.items())) for p in hist]
    assert len(keys) == len(set(keys)) == 40
    assert all(legal(p) for p in hist)
    best, value = s.best()
    assert value <= 1.3    # finds (or nearly finds) the optimum (64, 2, 3, 0) of 100 legal points


def test_batch_ask_distinct_and_pending_excluded():
    s = LearningSearch(DIMS, legal, seed=2)
    run(s, 15)
    a = s.ask(4)
    b = s.ask(3)            # a is still pending: b must not repeat it
    keys = [tuple(sorted(p.items())) for p in a + b]
    assert len(a) == 4 and len(b) == 3 and len(set(keys)) == 7
    assert all(legal(p) for p in a + b)


def test_exhausts_small_space_without_repeats():
    dims = [Dim("a", (1, 2, 3)), Dim("b", (0, 1))]
    s = LearningSearch(dims, None, seed=0)
    hist = run(s, 100, batch=4, f=lambda p: 1.0 + p["a"] + p["b"])
    assert len(hist) == 6
    assert s.ask(1) == [] and "exhausted" in s.stop()


def test_failures_steer_away():
    fails = lambda p: p["flag"] == 1    # half of the space fails
    late_failures = 0
    for seed in range(4):   # over seeds: one seed's count is a coin's few throws
        hist = run(LearningSearch(DIMS, legal, seed=seed), 40, fails=fails)
        late_failures += sum(fails(p) for p in hist[20:])
    assert late_failures <= 24     # random would fail 40 of these 80


def test_resume_replays_to_identical_asks():
    a = LearningSearch(DIMS, legal, seed=7)
    hist = run(a, 30, batch=3)
    b = LearningSearch(DIMS, legal, seed=7)
    for p in hist:
        b.tell(p, cost(p))
    assert a.ask(3) == b.ask(3)
    # and a different seed gives a different start
    c, d = LearningSearch(DIMS, legal, seed=7), LearningSearch(DIMS, legal, seed=8)
    assert c.ask(5) != d.ask(5)


def test_stop_once_the_best_held_for_its_patience_and_at_its_budget():
    s = LearningSearch(DIMS, legal, seed=4, patience=20)
    run(s, 20, f=lambda p: 2.0)
    assert s.stop() is None                                         # 19 without a gain after the first
    run(s, 1, f=lambda p: 2.0)
    assert s.stop() == ("the best time gained no more than 0.5% in its last 20 evaluations "
                        "(patience 20; patience 0 runs to the budget)")
    never = LearningSearch(DIMS, legal, seed=4, patience=0)
    run(never, 60, f=lambda p: 2.0)
    assert never.stop() is None
    t = LearningSearch(DIMS, legal, seed=4, budget=12)
    run(t, 12)
    assert "budget" in t.stop()


def test_sampled_candidates_for_large_space():
    dims = [Dim(f"p{i}", tuple(range(10))) for i in range(7)]     # 10^7 points: not enumerated
    f = lambda p: 1.0 + sum((p[f"p{i}"] - 3) ** 2 for i in range(7))
    s = LearningSearch(dims, lambda p: p["p0"] + p["p1"] < 15, seed=0, n_candidates=300)
    hist = run(s, 20, batch=2, f=f)
    assert len({tuple(sorted(p.items())) for p in hist}) == 20
    assert s.best()[1] < min(f(p) for p in hist[:10])


def test_replay_committed_extract():
    data = json.load(gzip.open(DATA / "convolution_A4000.json.gz", "rt"))
    keys = data["tune_params_keys"]
    dims = [Dim(k, tuple(data["tune_params"][k])) for k in keys]
    table = {tuple(e[k] for k in keys): e["time"] for e in data["cache"].values()}
    optimum = min(t for t in table.values() if isinstance(t, float))
    s = LearningSearch(dims, None, legal_points=[dict(zip(keys, c)) for c in table], seed=0)
    for _ in range(25):
        (p,) = s.ask(1)
        t = table[tuple(p[k] for k in keys)]
        assert t is not None    # every proposal is in the legal (brute-forced) set
        s.tell(p, t) if isinstance(t, float) else s.tell(p, None, failure="runtime_failed")
    assert s.best()[1] / optimum < 2.0


def _two_basins(stall: int) -> tuple[dict, LearningSearch]:
    """Best point (0, 0) in one corner, a second basin's best (9, 9) in the other, then
    twelve worse points near the first: the best has not improved for twelve evaluations."""
    dims = [Dim("a", tuple(range(10))), Dim("b", tuple(range(10)))]
    s = LearningSearch(dims, seed=3, n_init=2, stall=stall, alignment=False)
    s.tell({"a": 0, "b": 0}, 1.0)
    s.tell({"a": 9, "b": 9}, 2.0)
    for i in range(1, 13):
        s.tell({"a": i % 4, "b": i // 4 + 1}, 5.0 + i)
    return {"a": 9, "b": 9}, s


def _near(p: dict, q: dict) -> bool:
    diff = [abs(p[k] - q[k]) for k in p]
    return sum(d > 0 for d in diff) <= 1 or max(diff) <= 1


def test_a_stalled_search_takes_its_local_steps_near_another_basins_best():
    other, s = _two_basins(stall=10)
    assert len(s.told) % s.local_every == 0          # the next proposal is a local step
    assert _near(s.ask(1)[0], other)


def test_a_search_that_still_improves_takes_its_local_steps_near_its_best():
    _, s = _two_basins(stall=100)
    assert _near(s.ask(1)[0], {"a": 0, "b": 0})


def test_the_start_gives_every_switch_combination_a_point_before_any_gets_a_second():
    # four two-valued switches (16 combinations, one of them illegal) among wide parameters that
    # dominate the distances a space-filling start maximizes
    dims = [Dim(f"x{i}", tuple(range(12))) for i in range(3)] + [Dim(f"s{i}", (0, 1)) for i in range(4)]
    legal_point = lambda p: not all(p[f"s{i}"] for i in range(4))
    for seed in range(3):
        s = LearningSearch(dims, legal_point, seed=seed, n_init=20)
        combos = [tuple(p[f"s{i}"] for i in range(4)) for p in s.ask(20)]
        assert len(set(combos[:15])) == 15             # the 15 legal combinations, once each
        assert len(set(combos[15:])) == 5              # then a second round, still without repeats


def test_the_start_gives_an_enumerations_values_points_in_turn_as_it_does_a_switchs():
    # an unordered enumeration of four forms beside a wide size: spread by rank, the first and last
    # forms were the far ones and the middle two the start's leftovers
    dims = [Dim("size", tuple(range(1, 33))), Dim("form", (0, 1, 2, 3), "choice"), Dim("order", (0, 1, 2, 3))]
    for seed in range(3):
        start = LearningSearch(dims, seed=seed, n_init=8).ask(8)
        assert sorted(p["form"] for p in start) == [0, 0, 1, 1, 2, 2, 3, 3]
    ranked_start = LearningSearch(dims[:1] + [Dim("form", (0, 1, 2, 3), "ordinal")] + dims[2:], seed=0, n_init=8)
    assert sorted(p["form"] for p in ranked_start.ask(8)) != [0, 0, 1, 1, 2, 2, 3, 3]


def test_the_start_is_sized_by_the_parameters_that_vary():
    # five varying parameters and five with a single value: 2 * 5 = 10 points, not 2 * 10 capped
    dims = [Dim(f"v{i}", (1, 2, 4)) for i in range(5)] + [Dim(f"c{i}", (3,)) for i in range(5)]
    assert LearningSearch(dims, seed=0).n_init == 10
    assert LearningSearch(dims[:3], seed=0).n_init == 8     # at least 8
    assert LearningSearch(dims[:5] + [Dim(f"w{i}", (1, 2)) for i in range(6)], seed=0).n_init == 10   # at most 10


def _stalled_with_a_switch() -> LearningSearch:
    """The best point (0, 0) on side s=1 of a switch, thirteen worse points near it since; on side
    s=0 four points whose times fall as `a` grows (there the best lies at large a, the opposite
    of side s=1's trend), within two parameters of the best: no basin of their own."""
    dims = [Dim("a", tuple(range(10))), Dim("b", tuple(range(10))), Dim("s", (0, 1))]
    s = LearningSearch(dims, seed=3, n_init=2, stall=10, alignment=False)
    for a in (1, 3, 5, 7):
        s.tell({"a": a, "b": 0, "s": 0}, 12.0 - a)
    s.tell({"a": 0, "b": 0, "s": 1}, 1.0)
    for i in range(1, 14):
        s.tell({"a": i % 4, "b": i // 4 + 1, "s": 1}, 1.0 + i)
    return s


def test_a_stalled_search_with_a_switch_takes_its_local_steps_on_the_other_side_by_that_sides_own_trend():
    s = _stalled_with_a_switch()
    assert len(s.told) % s.local_every == 0          # the next proposal is a local step
    p = s.ask(1)[0]
    assert p["s"] == 0 and p["a"] >= 7, p


def test_the_other_sides_proposal_is_the_same_after_a_replayed_history():
    first = _stalled_with_a_switch().ask(3)
    assert _stalled_with_a_switch().ask(3) == first


def _long_stalled() -> LearningSearch:
    """The best point (0, 0) on side s=1 of a switch and sixteen evaluations since, more than
    twice its stall: twelve on side s=0, whose own best improved at its last one, then four on
    side s=1. The next proposal is not a local step."""
    dims = [Dim("a", tuple(range(10))), Dim("b", tuple(range(10))), Dim("s", (0, 1))]
    s = LearningSearch(dims, seed=3, n_init=2, stall=5, alignment=False, flip_every=0)
    s.tell({"a": 0, "b": 0, "s": 1}, 1.0)
    for i in range(12):
        s.tell({"a": i % 10, "b": 5 + i // 10, "s": 0}, 30.0 - i)
    for i in range(1, 5):
        s.tell({"a": i, "b": 9, "s": 1}, 2.0 + i)
    return s


def _side_searches(s: LearningSearch) -> list[tuple]:
    searched: list[tuple] = []
    inner = s._side_search
    s._side_search = lambda cands, done, j, level, rng: searched.append((j, level)) or inner(cands, done, j, level, rng)
    return searched


def test_however_long_a_search_has_stalled_its_steps_between_local_ones_are_the_whole_spaces_models():
    """Before, a search stalled twice as long gave every step to a side still climbing: on the
    xgemm brute force (a GEMM, its optimum on the best point's side) such sides kept every step
    for dozens of evaluations (bench/STRATEGIES.md)."""
    s = _long_stalled()
    assert len(s.told) % s.local_every == 1                  # not a local step
    searched = _side_searches(s)
    (p,) = s.ask(1)
    assert searched == []
    s.tell(p, 50.0)
    s.ask(1)                                                  # the local step that follows searches the side
    assert searched == [(2, 0)]


def _stalled_with_two_switches(mirror_time: float) -> LearningSearch:
    """The best point (0, 0, s=1, t=1) and twelve worse points on its sides of both switches;
    three points on side t=0 (the slowest 3.0), three on side s=0, of which (0, 0, s=0, t=1)
    takes `mirror_time`. The next proposal is a local step."""
    dims = [Dim("a", tuple(range(6))), Dim("b", tuple(range(6))), Dim("s", (0, 1)), Dim("t", (0, 1))]
    s = LearningSearch(dims, seed=5, n_init=2, stall=10, alignment=False, flip_every=0)
    s.tell({"a": 0, "b": 0, "s": 1, "t": 1}, 1.0)
    s.tell({"a": 0, "b": 0, "s": 0, "t": 1}, mirror_time)
    for a in (2, 4):
        s.tell({"a": a, "b": 3, "s": 0, "t": 1}, 2.0 + a)
    for a in (1, 3, 5):
        s.tell({"a": a, "b": 5, "s": 1, "t": 0}, 3.0 + a)
    for i in range(1, 12):
        s.tell({"a": i % 6, "b": 1 + i // 6, "s": 1, "t": 1}, 1.5 + i / 10)
    return s


def _sides_searched_in(s: LearningSearch, proposals: int) -> list[int]:
    """The switches whose other side the next proposals searched (each told a slow time)."""
    searched = _side_searches(s)
    for _ in range(proposals):
        s.tell(s.ask(1)[0], 50.0)
    return [j for j, _ in searched]


def test_a_side_already_as_fast_as_the_best_is_not_searched_on_its_own():
    # side s=0 within 1% of the best: only switch t's other side, in every local step
    assert set(_sides_searched_in(_stalled_with_two_switches(mirror_time=1.005), 6)) == {3}
    # side s=0 30% behind: both sides in turn
    assert set(_sides_searched_in(_stalled_with_two_switches(mirror_time=1.3), 6)) == {2, 3}


def _replayed_best(cache: Path, seed: int, budget: int = 100, **options) -> float:
    """The learning search's best time over the optimum's, one proposal at a time on a committed
    brute force (bench/data, tests/data), to its budget (100) or its own stop."""
    data = json.load(gzip.open(cache, "rt"))
    keys = data["tune_params_keys"]
    times = {tuple(e[k] for k in keys): e["time"] for e in data["cache"].values()}
    dims = [Dim(k, tuple(data["tune_params"][k])) for k in keys]
    s = LearningSearch(dims, legal_points=[dict(zip(keys, c)) for c in times], seed=seed, budget=budget, **options)
    while s.stop() is None:
        p = s.ask(1)[0]
        s.tell(p, times[tuple(p[k] for k in keys)])
    return s.best()[1] / min(times.values())


def test_on_the_stencil_brute_force_a_side_far_behind_does_not_keep_the_search_from_the_best_points_side():
    """stencil_large_H200, seed 4: under an older rule its best held at 1.059 from the 6th
    evaluation while every step searched the shared-memory side (12% behind at best) and the
    patience stop ended it at 86; the optimum is on the best point's side."""
    assert _replayed_best(BENCH / "stencil_large_H200.json.gz", seed=4) <= 1.01


def test_on_the_w6600_brute_force_an_aligned_start_finds_the_optimums_side_by_50_evaluations():
    """convolution W6600, seed 1: a start of any sizes put its use_shmem=0 points on misaligned block
    widths (80-100x slow) and the search held the shared-memory plateau, 1.198x at 50; a start of
    powers of two sees that side's aligned points (2-3x) and reaches the optimum by 50."""
    assert _replayed_best(DATA / "convolution_W6600.json.gz", seed=1, budget=50, aligned_start=False) > 1.19
    assert _replayed_best(DATA / "convolution_W6600.json.gz", seed=1, budget=50) <= 1.01


def test_the_start_draws_sizes_that_are_powers_of_two_while_candidates_have_them():
    dims = [Dim("bx", (16, 24, 32, 48, 64, 80)), Dim("tile", (1, 2, 3)), Dim("flag", (0, 1))]
    start = LearningSearch(dims, seed=3, n_init=8).ask(8)
    assert all(p["bx"] in (16, 32, 64) and p["tile"] in (1, 2) for p in start)
    assert any(p["bx"] not in (16, 32, 64) or p["tile"] == 3
               for p in LearningSearch(dims, seed=3, n_init=8, aligned_start=False).ask(8))
    odd_only = LearningSearch(dims, lambda p: p["bx"] in (24, 48, 80), seed=3, n_init=4).ask(4)
    assert len(odd_only) == 4 and all(p["bx"] in (24, 48, 80) for p in odd_only)   # none aligned: any


def test_on_the_held_out_dedisp_brute_force_most_runs_come_within_1pct_in_50_evaluations():
    """dedisp_H200 (examples/dedisp, brute-forced on an H200 and first replayed after the strategy's
    last change): seeds 0-9 came within 1% of the optimum by evaluation 50 in 7 runs; the bench's
    median evaluations to 1% there is 36 (bench/STRATEGIES.md, twentieth session)."""
    ratios = [_replayed_best(BENCH / "dedisp_H200.json.gz", seed=seed, budget=50) for seed in range(10)]
    assert sum(r <= 1.01 for r in ratios) >= 6, ratios


def test_on_the_xgemm_brute_force_a_long_stall_keeps_its_whole_space_steps():
    """xgemm_H200, seed 24: its first point (1.053x) stayed its best for all 100 evaluations while
    every proposal from the 22nd searched another side of KWG, SA or SB (the long stall, since
    removed); the optimum is on the best point's side of all three."""
    assert _replayed_best(BENCH / "xgemm_H200.json.gz", seed=24) <= 1.01


def _switch_history(**opts) -> LearningSearch:
    """Twelve points on side s=1 of a switch, the best (2, 2), the second best (5, 5); none on s=0
    near them: the model has no evidence about either point's other side."""
    dims = [Dim("a", tuple(range(8))), Dim("b", tuple(range(8))), Dim("s", (0, 1))]
    s = LearningSearch(dims, seed=1, n_init=2, alignment=False, **opts)
    s.tell({"a": 2, "b": 2, "s": 1}, 1.0)
    s.tell({"a": 5, "b": 5, "s": 1}, 1.1)
    s.tell({"a": 0, "b": 7, "s": 1}, None, failure="runtime_failed")
    for i, (a, b) in enumerate([(i, (i + 4) % 8) for i in range(8)] + [(1, 0)]):
        s.tell({"a": a, "b": b, "s": 1}, 3.0 + i)
    return s


def test_every_fourth_proposal_tries_a_best_points_other_switch_value():
    s = _switch_history()
    assert len(s.told) % s.flip_every == 0
    assert s.ask(1)[0] == {"a": 2, "b": 2, "s": 0}
    s.tell({"a": 2, "b": 2, "s": 0}, 4.0)
    for a in (3, 4, 6):                             # three more points, all slow
        s.tell({"a": a, "b": 1, "s": 1}, 20.0)
    assert s.ask(1)[0] == {"a": 5, "b": 5, "s": 0}  # the best point's flip is told: the next best's


def test_no_switch_flips_when_turned_off():
    assert _switch_history(flip_every=0).ask(1)[0] != {"a": 2, "b": 2, "s": 0}


def test_a_side_search_on_a_large_side_scores_its_best_points_neighbours_and_a_sample_not_every_candidate():
    s = _stalled_with_a_switch()
    s.max_side_score = 40                           # side s=0 has 96 untried points
    scored = []
    inner = s._best_scored
    s._best_scored = lambda cands, *a, **k: scored.append(len(cands)) or inner(cands, *a, **k)
    p = s.ask(1)[0]
    assert p["s"] == 0 and scored == [40], (p, scored)
    again = _stalled_with_a_switch()
    again.max_side_score = 40
    assert again.ask(1)[0] == p                     # the sample is drawn from the ask's seeded generator


def test_on_the_w6600_brute_force_a_landscape_of_catastrophes_is_modelled_on_log_times():
    """convolution W6600, seed 11: most of the space is 28-180x slower than the optimum (block widths
    that are not powers of two, without shared memory); on the normal scores of the ranks the
    search held 1.198x for 100 evaluations, on log times it is within 1% by the 67th."""
    # without the aligned start, whose aligned sizes keep the catastrophes out of the models' points
    # (with it, the rule changes no run of W6600's seeds 0-199 asked one at a time)
    assert _replayed_best(DATA / "convolution_W6600.json.gz", seed=11, log_above=0.0, aligned_start=False) > 1.01
    assert _replayed_best(DATA / "convolution_W6600.json.gz", seed=11, aligned_start=False) <= 1.01


def test_a_warm_start_proposes_its_points_first_in_order_skipping_illegal_and_unknown_ones():
    start = [{"bx": 256, "by": 4, "tile": 3, "flag": 0},      # illegal here (256 * 4 > 512)
             {"bx": 64, "by": 2, "tile": 3, "flag": 0},
             {"bx": 48, "by": 2, "tile": 3, "flag": 0},       # 48 is no value of bx: dropped
             {"bx": 32, "by": 1, "tile": 2, "flag": 1},
             {"bx": 64, "by": 2, "tile": 3, "flag": 0}]       # a repeat
    s = LearningSearch(DIMS, legal, seed=3, start=start)
    first = s.ask(2)
    assert first == [start[1], start[3]]
    rest = run(s, 10)
    assert start[1] not in rest and start[3] not in rest and all(legal(p) for p in rest)
    assert s.n_init == 8 and len({tuple(sorted(p.items())) for p in first + rest}) == 12


def test_a_warm_start_takes_at_most_the_start_size_of_points_then_the_model_proposes():
    ranked = sorted((dict(zip(("bx", "by", "tile", "flag"), (bx, by, t, f))) for bx in DIMS[0].values
                     for by in DIMS[1].values for t in DIMS[2].values for f in (0, 1)
                     if bx * by <= 512), key=cost)
    s = LearningSearch(DIMS, legal, seed=5, start=ranked)
    hist = run(s, 12)
    assert hist[: s.n_init] == ranked[: s.n_init]
    assert hist[s.n_init:] != ranked[s.n_init: 12]       # after the start, the model's own proposals


def test_a_warm_started_search_replays_to_identical_asks():
    start = [{"bx": 128, "by": 4, "tile": 4, "flag": 0}, {"bx": 16, "by": 8, "tile": 1, "flag": 1}]
    a = LearningSearch(DIMS, legal, seed=9, start=start)
    hist = run(a, 13, batch=2)
    b = LearningSearch(DIMS, legal, seed=9, start=start)
    for p in hist:
        b.tell(p, cost(p))
    assert hist[:2] == start and a.ask(3) == b.ask(3)


def test_named_values_are_a_choice_and_numbered_ones_only_when_declared_so():
    assert Dim("memory", ("global", "shared", "texture")).is_choice() and Dim("form", (0, 1, 2), "choice").is_choice()
    assert not Dim("blocks_per_sm", (0, 1, 2, 3)).is_choice() and not Dim("switch", ("off", "on")).is_choice()
    search = LearningSearch([Dim("b", (32, 64)), Dim("form", (0, 1, 2), "choice"), Dim("unroll", (0, 1, 2))])
    assert search._choices == {1}


def test_the_hyperparameter_fit_sees_at_most_max_train_points_however_long_the_search(monkeypatch):
    import sweep.plan.learning as learning

    sizes = []
    plain_fit = learning.GP.fit
    monkeypatch.setattr(learning.GP, "fit", classmethod(
        lambda cls, coords, levels, y, **kw: (sizes.append(len(y)), plain_fit(coords, levels, y, **kw))[1]))
    s = LearningSearch(DIMS, legal, seed=0, max_train=24, patience=0, flip_every=0)
    run(s, 60)
    assert max(sizes) == 24 and len(sizes) > 5    # refitted as points came, each time on the model's 24


def test_a_legal_list_over_a_grid_past_int64_positions_is_searched_all_the_same():
    """Fifteen kernels' macros make a grid of 4**40 points, past int64's mixed-radix positions: the
    listed legal points are found by a dict instead, every proposal one of them, none twice."""
    dims = [Dim(f"M{i}", (1, 2, 4, 8)) for i in range(40)]
    legal = [{f"M{i}": 2 ** ((i + j) % 4) for i in range(40)} for j in range(4)] + \
            [{f"M{i}": 1 if i != j else 8 for i in range(40)} for j in range(8)]
    search = LearningSearch(dims, legal_points=legal, seed=0)
    asked = []
    while (got := search.ask(3)):
        asked += got
        for p in got:
            search.tell(p, float(sum(p.values())))
    assert sorted(map(str, asked)) == sorted(map(str, legal))
