"""The surrogate's columns of a discrete space (sweep.plan.surrogate.columns)."""

from __future__ import annotations

import numpy as np

from sweep.plan.surrogate import columns, normal_scores, powers_of_two, training, warped


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


def test_times_whose_median_is_over_ten_times_their_best_are_modelled_on_log_time_not_ranks():
    y = np.log([1.0, 1.5, 40.0, 90.0, 100.0])              # the median 40x the best
    ys, sd = warped(y, "copula", log_above=10.0)
    assert np.allclose(ys, (y - y.mean()) / y.std()) and sd == y.std()


def test_times_with_a_few_slow_outliers_keep_the_normal_scores_of_their_ranks():
    y = np.log([1.0, 1.5, 2.0, 90.0, 100.0])               # the median 2x the best
    ys, sd = warped(y, "copula", log_above=10.0)
    assert np.allclose(ys, normal_scores(y)) and sd == y.std()
    assert np.allclose(warped(np.log([1.0, 1.5, 40.0, 90.0, 100.0]), "copula", log_above=0.0)[0],
                       normal_scores(np.log([1.0, 1.5, 40.0, 90.0, 100.0])))   # 0: never


def test_the_aligned_levels_are_the_powers_of_two_of_size_parameters_only():
    values = [(16, 32, 48, 64, 96), (0, 1), (1, 2, 3), (0.5, 1.0, 2.0), (4, 8, 16)]
    aligned = powers_of_two(values)
    assert [j for j, _ in aligned] == [0, 2, 4]       # not the switch, not the floats
    assert [m.tolist() for _, m in aligned] == [[True, True, False, True, False], [True, True, False],
                                                [True, True, True]]


def test_a_model_sees_at_most_max_train_points_the_best_half_and_the_most_recent():
    done = [((i,), float(t)) for i, t in enumerate([5, 1, 6, 2, 7, 8, 9, 3])]
    keys, y = training(done, 4)
    assert keys == [(1,), (3,), (6,), (7,)] and np.allclose(np.exp(y), [1, 2, 9, 3])
    assert training(done, 100)[0] == [k for k, _ in done]


def test_a_choice_is_a_simplex_each_value_as_near_every_other_with_no_alignment_columns():
    from sweep.plan.surrogate import GP

    col_dim, coords = columns([(0, 1, 2, 3), (32, 64, 96)], [0, 1], choices=frozenset({0}))
    assert col_dim == [0, 1, 1, 1]                # the choice: one column; the size: rank, twos, odd part
    table = GP._table(coords[0], 0.6)
    off = table[~np.eye(4, dtype=bool)]
    assert np.allclose(np.diag(table), 1.0) and np.allclose(off, off[0]) and off[0] < 1.0
    ordinal = GP._table(columns([(0, 1, 2, 3)], [0])[1][0], 0.6)
    assert ordinal[0, 1] > ordinal[0, 2] > ordinal[0, 3]   # read as ranks, 0 is nearer 1 than 3
