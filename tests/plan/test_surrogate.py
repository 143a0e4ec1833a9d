"""The surrogate's columns of a discrete space (sweep.plan.surrogate.columns)."""

from __future__ import annotations

import numpy as np

from sweep.plan.surrogate import columns


def test_an_integer_parameter_gets_its_rank_its_power_of_two_and_its_odd_part_as_columns():
    sizes = (16, 32, 48, 64, 96, 128)
    col_dim, coords = columns([sizes], [0])
    assert col_dim == [0, 0, 0]
    rank, twos, odd = coords
    assert np.allclose(rank, np.arange(6) / 5)
    assert np.allclose(twos, (np.array([4, 5, 4, 6, 5, 7]) - 4) / 3)
    # the powers of two share odd part 1 (column 0); 48 and 96 (odd part 3) sit apart from them
    assert list(odd) == [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]


def test_powers_of_two_alone_get_no_odd_part_column_and_switches_and_floats_only_their_rank():
    col_dim, coords = columns([(1, 2, 4, 8), (0, 1), (0.5, 1.0, 2.0), ("a", "b", "c")], [0, 1, 2, 3])
    assert col_dim == [0, 1, 2, 3, 0]            # ranks, then the power of two of the first alone
    assert np.allclose(coords[4], [0, 1 / 3, 2 / 3, 1])


def test_without_alignment_each_parameter_is_its_rank_alone():
    col_dim, _ = columns([(16, 48, 64), (1, 3, 5)], [0, 1], alignment=False)
    assert col_dim == [0, 1]
