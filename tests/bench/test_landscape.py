"""bench/landscape.py: local minima under one-parameter moves and their basins of attraction."""

from __future__ import annotations

from bench.landscape import descent_basins


def _space(table: dict) -> dict:
    return {"keys": ["x", "y"], "params": {"x": [0, 1, 2], "y": [0, 1]}, "table": table}


def test_descent_basins_sends_each_point_to_the_local_minimum_its_steepest_descent_ends_in():
    # two minima: (0, 0) at 1.0 and (2, 1) at 2.0; a failed point is never a descent's target
    table = {(0, 0): 1.0, (1, 0): 3.0, (2, 0): 5.0,
             (0, 1): 4.0, (1, 1): "runtime_failed", (2, 1): 2.0}
    root = descent_basins(_space(table))
    assert root[(0, 0)] == (0, 0) and root[(2, 1)] == (2, 1)
    assert root[(1, 0)] == (0, 0)             # best neighbour (0, 0) at 1.0
    assert root[(2, 0)] == (0, 0)             # (0, 0) is one move away along x
    assert root[(0, 1)] == (0, 0)
    assert root[(1, 1)] == (2, 1)             # a failed point descends too: to its best neighbour


def test_a_point_whose_only_better_points_are_two_moves_away_is_its_own_local_minimum():
    # (1, 0) and (0, 1) are not in the space: (0, 0) has no legal neighbour, so (1, 1) at 1.0 is not
    # reached from it and both are local minima
    table = {(0, 0): 2.0, (1, 1): 1.0}
    root = descent_basins(_space(table))
    assert root == {(0, 0): (0, 0), (1, 1): (1, 1)}
