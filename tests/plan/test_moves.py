"""sweep.plan.moves: the learning search's local moves, from what it was told."""

from __future__ import annotations

import numpy as np

from sweep.plan.moves import (basin_heads, near, out_of_patience, ranked, sampled, spread, stalled_for,
                              subsample, switch_flips, unlike_sides)

TOLD = {(0, 0, 1): (1.0, None), (0, 1, 1): (1.1, None), (5, 5, 0): (1.2, None), (3, 3, 1): (None, "verify_failed"),
        (7, 7, 1): (9.0, None)}


def test_ranked_lists_the_points_that_ran_fastest_first_and_leaves_failures_out():
    assert ranked(TOLD) == [(0, 0, 1), (0, 1, 1), (5, 5, 0), (7, 7, 1)]


def test_basin_heads_skip_points_within_the_basin_of_a_better_one():
    # (0, 1, 1) is one parameter from the best, (7, 7, 1) two: within its basin, not more than 2 apart
    assert basin_heads(TOLD, 3, basin=2) == [(0, 0, 1), (5, 5, 0)]
    assert basin_heads(TOLD, 2, basin=0) == [(0, 0, 1), (0, 1, 1)]


def test_stalled_for_counts_the_evaluations_since_the_best_last_improved_failures_included():
    order = [(7, 7, 1), (0, 1, 1), (3, 3, 1), (0, 0, 1), (5, 5, 0)]
    assert stalled_for(TOLD, order) == 1
    assert stalled_for(TOLD, order[:3]) == 1 and stalled_for(TOLD, order[:2]) == 0


def told_in_order(times):
    return {(i,): (t, None if t is not None else "runtime_failed") for i, t in enumerate(times)}, \
        [(i,) for i in range(len(times))]


def test_stalled_for_with_a_gain_lets_no_run_of_small_gains_reset_the_count():
    told, order = told_in_order([10.0, 9.96, 9.92, 9.88])     # 0.4% each
    assert stalled_for(told, order) == 0
    assert stalled_for(told, order, gain=0.005) == 1         # 9.92 is 0.8% under 10.0: counted from there
    assert stalled_for(told, order, gain=0.05) == 3


def test_out_of_patience_needs_patience_evaluations_and_half_of_all_without_a_gain():
    told, order = told_in_order([5.0] * 100 + [4.0] + [4.0] * 70)
    assert out_of_patience(told, order[:161], 60, 0.005) == 0       # 60 held, but 161 made: 81 needed
    assert out_of_patience(told, order, 60, 0.005) == 0              # 70 of 171
    told, order = told_in_order([5.0, None] + [6.0] * 60)
    assert out_of_patience(told, order[:60], 60, 0.005) == 0         # 59 held, the failure among them
    assert out_of_patience(told, order[:61], 60, 0.005) == 60
    assert out_of_patience(told, order, 0, 0.005) == 0               # patience 0: never


def test_near_is_one_parameter_any_value_or_two_parameters_one_level():
    cands = np.array([(0, 6, 1), (1, 1, 1), (2, 1, 1), (1, 1, 0)])
    assert near(cands, [(0, 0, 1)]).tolist() == [True, True, False, False]


def test_near_takes_an_enumerations_every_other_value_as_one_level():
    # (size, form): form 3 is as near form 0 as form 1 is, when the form is an unordered enumeration
    cands = np.array([(1, 3), (1, 1), (2, 3)])
    assert near(cands, [(0, 0)]).tolist() == [False, True, False]
    assert near(cands, [(0, 0)], choices=[1]).tolist() == [True, True, False]


def test_switch_flips_go_through_the_best_points_in_order_one_switch_at_a_time():
    assert list(switch_flips(TOLD, [2], 2)) == [(0, 0, 0), (0, 1, 0)]
    assert list(switch_flips(TOLD, [0, 2], 1)) == [(1, 0, 1), (0, 0, 0)]


def test_subsample_keeps_every_marked_candidate_and_fills_up_to_the_limit_at_random():
    keep = np.zeros(100, dtype=bool)
    keep[[3, 50, 97]] = True
    mask = subsample(keep, 10, np.random.default_rng(0))
    assert mask.sum() == 10 and mask[[3, 50, 97]].all()
    assert subsample(keep, 2, np.random.default_rng(0)).sum() == 3      # the marked ones even over the limit
    assert subsample(np.zeros(5, dtype=bool), 10, np.random.default_rng(0)).all()   # fewer than the limit: all


def test_unlike_sides_are_the_switches_whose_other_side_holds_no_time_near_the_best():
    told = {(0, 1, 1): (1.0, None), (0, 0, 1): (1.005, None), (0, 1, 0): (1.5, None), (1, 0, 0): (None, "verify_failed")}
    assert unlike_sides(told, [1, 2], within=0.01) == [2]      # switch 1's other side is within 1%
    assert unlike_sides(told, [1, 2], within=0.001) == [1, 2]
    assert unlike_sides(told, [], within=0.01) == []
    assert unlike_sides({(1, 0, 0): (None, "verify_failed")}, [1, 2], within=0.01) == []   # nothing ran yet


def test_a_large_spaces_candidates_hold_the_best_points_one_level_moves_and_nothing_seen():
    told = {(5, 5, 5): (1.0, None), (0, 0, 0): (9.0, None), (9, 9, 9): (None, "compile_failed")}
    seen = set(told) | {(5, 6, 5)}
    found = sampled(told, seen, np.array([10, 10, 10]), 200, np.random.default_rng(0))
    assert not seen & set(found) and len(found) == len(set(found)) <= 200
    assert {(4, 5, 5), (5, 5, 7), (5, 3, 5)} <= set(found)


def test_a_large_spaces_candidates_move_an_enumeration_to_every_other_value_in_one_step():
    told = {(5, 0): (1.0, None)}
    one_move = lambda found: {k[1] for k in found if k[0] == 5}
    assert one_move(sampled(told, set(told), np.array([10, 8]), 1, np.random.default_rng(0))) == {1, 2}
    assert one_move(sampled(told, set(told), np.array([10, 8]), 1, np.random.default_rng(0), choices=[1])) == \
        set(range(1, 8))


def test_the_start_spreads_over_the_least_covered_switch_combinations_first():
    cands = np.array([(x, s) for x in range(8) for s in (0, 1)])
    taken = [(0, 0), (7, 0)]
    pick = spread(cands, taken, np.array([1]), lambda k: np.asarray(k, dtype=float) / 7.0, np.random.default_rng(1))
    assert pick[1] == 1                                 # the switch value nothing taken has yet
    first = spread(cands, [], np.array([1]), lambda k: np.asarray(k, dtype=float), np.random.default_rng(1))
    assert first in set(map(tuple, cands.tolist()))
