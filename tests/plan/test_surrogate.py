"""The surrogate (sweep.plan.surrogate): its columns of a discrete space, its training set, its hyperparameter fit."""

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


def _plain_coordinate_search(coords, levels, y, additive_grid=(0.0, 0.3, 0.7), sweeps=2):
    """GP.fit's search written the plain way: the whole kernel made again for every trial."""
    from sweep.plan.surrogate import GP, LENGTHSCALES, NUGGETS

    n, d = levels.shape
    per = [[GP._table(coords[j], v)[levels[:, j]][:, levels[:, j]] for v in LENGTHSCALES] for j in range(d)]

    def lml(idx, add, nugget):
        k = (1 - add) * np.prod([per[j][idx[j]] for j in range(d)], axis=0) \
            + add * np.sum([per[j][idx[j]] for j in range(d)], axis=0) / d + nugget * np.eye(n)
        chol = np.linalg.cholesky(k)
        alpha = np.linalg.solve(chol, y)
        return -0.5 * n * np.log(max(alpha @ alpha / n, 1e-12)) - np.log(np.diag(chol)).sum()

    idx, add, nugget = [LENGTHSCALES.index(0.6)] * d, additive_grid[len(additive_grid) // 2], 1e-3
    best = lml(idx, add, nugget)
    for _ in range(sweeps):
        changed = False
        for j in range(d):
            for g in range(len(LENGTHSCALES)):
                trial = idx[:j] + [g] + idx[j + 1:]
                if g != idx[j] and (v := lml(trial, add, nugget)) > best + 1e-9:
                    best, idx, changed = v, trial, True
        for a in additive_grid:
            if a != add and (v := lml(idx, a, nugget)) > best + 1e-9:
                best, add, changed = v, a, True
        for g in NUGGETS:
            if g != nugget and (v := lml(idx, add, g)) > best + 1e-9:
                best, nugget, changed = v, g, True
        if not changed:
            break
    return [LENGTHSCALES[i] for i in idx], add, nugget


def test_the_fit_picks_what_a_plain_coordinate_search_picks_making_each_columns_others_once():
    from sweep.plan.surrogate import GP

    rng = np.random.default_rng(7)
    values = [(16, 32, 48, 64, 96, 128), (1, 2, 4, 8), (0, 1), (1, 2, 3, 4)]
    col_dim, coords = columns(values, [0, 1, 2, 3])
    picks = set()
    for trial in range(6):
        keys = np.stack([rng.integers(0, len(v), 40) for v in values], 1)
        x = keys / np.array([len(v) - 1 for v in values])
        y = np.sin(3 * x[:, 0] + trial) + x[:, 1] * x[:, 3] + 0.5 * x[:, 2] + 0.05 * rng.normal(size=40)
        y = (y - y.mean()) / y.std()
        gp = GP.fit(coords, keys[:, col_dim], y)
        plain = _plain_coordinate_search(coords, keys[:, col_dim], y)
        assert (list(gp.ls), gp.additive, gp.nugget) == (plain[0], plain[1], plain[2])
        picks.add((tuple(gp.ls), gp.additive, gp.nugget))
    assert len(picks) > 1            # the data moved the fit: not six times the starting point


def test_the_blocked_forward_substitution_solves_as_a_general_solver_does_across_block_edges():
    from sweep.plan.surrogate import lower_solve

    rng = np.random.default_rng(3)
    for n in (1, 3, 63, 64, 65, 130, 300):
        a = rng.normal(size=(n, n))
        lower = np.linalg.cholesky(a @ a.T + n * np.eye(n))
        b = rng.normal(size=n)
        assert np.allclose(lower_solve(lower, b), np.linalg.solve(lower, b), rtol=1e-12, atol=1e-14)
