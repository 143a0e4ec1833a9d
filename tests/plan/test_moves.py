"""sweep.plan.moves: the learning search's local moves, from what it was told."""

from __future__ import annotations

import numpy as np

from sweep.plan.moves import basin_heads, near, ranked, stalled_for, subsample, switch_flips

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


def test_near_is_one_parameter_any_value_or_two_parameters_one_level():
    cands = np.array([(0, 6, 1), (1, 1, 1), (2, 1, 1), (1, 1, 0)])
    assert near(cands, [(0, 0, 1)]).tolist() == [True, True, False, False]


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
