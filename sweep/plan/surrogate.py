"""Numpy-only surrogate pieces for sweep.plan.learning: a Gaussian process with a
Matern-5/2 ARD kernel on normalized ordinal encodings, its hyperparameters fitted by
a deterministic coordinate search on the (profiled) marginal likelihood, expected
improvement, a kernel-weighted feasibility estimate, and the normal-scores warp of times.

Pure module: stdlib + numpy only.
"""

from __future__ import annotations

import math

import numpy as np

SQRT5 = math.sqrt(5.0)
LENGTHSCALES = (0.08, 0.15, 0.3, 0.6, 1.2, 2.5, 8.0)   # in units of the [0, 1] rank encoding
NUGGETS = (1e-6, 1e-4, 1e-3, 1e-2, 5e-2, 0.2)           # noise / signal variance ratio


def columns(values: list, vary, alignment: bool = True,
            choices: frozenset = frozenset()) -> tuple[list[int], list[np.ndarray]]:
    """The surrogate's columns of a discrete space: for each dimension of `vary` (indices into
    `values`, each dimension's ordered values), its rank / (levels - 1); with `alignment`, for
    positive integer dimensions of more than two values, also the power of two dividing each
    value and the log2 of what is left (its odd part), each normalized to [0, 1]. The ranks
    alone cannot say that 32 and 128 share a trait 48 and 96 lack: warp and vector widths and
    power-of-two tiles make sizes that are not powers of two cost 28-180x on some GPUs (W6600,
    bench/STRATEGIES.md). A dimension in `choices` is an enumeration with no order (four ways to
    write one test): its levels are the corners of a simplex, each one apart from every other,
    so the model reads no trend from 0 to 1 to 2 (pnpoly's BETWEEN, whose forms 0 and 2 are fast
    and 1 and 3 slow). Returns each column's dimension and its coordinates per level (a vector,
    or a row per level for a choice)."""
    col_dim: list[int] = []
    coords: list[np.ndarray] = []
    for j in vary:
        col_dim.append(int(j))
        n = len(values[j])
        coords.append(np.eye(n) / math.sqrt(2.0) if j in choices else np.arange(n) / (n - 1.0))
    integer = [j for j in vary if alignment and j not in choices and _sizes(values[j])]
    twos = {j: [(int(v) & -int(v)).bit_length() - 1 for v in values[j]] for j in integer}
    odd = {j: [math.log2(int(v) >> t) for v, t in zip(values[j], twos[j])] for j in integer}
    for kind in (twos, odd):
        for j in integer:
            c = np.array(kind[j], dtype=float)
            if c.max() > c.min():
                col_dim.append(int(j))
                coords.append((c - c.min()) / (c.max() - c.min()))
    return col_dim, coords


def _sizes(values) -> bool:
    """Positive integers, more than two of them: sizes (threads, tiles, vector widths) rather
    than a switch or a choice."""
    return len(values) > 2 and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0
                                   for v in values)


def powers_of_two(values: list) -> list[tuple[int, np.ndarray]]:
    """For each dimension of sizes (the ones `columns` gives alignment columns), which of its
    levels are powers of two: (dimension, mask over its levels), for a start drawn from aligned
    sizes. A random start on W6600 lands mostly on misaligned block widths or tiles of 3 where
    shared memory is off, 28-180x slow, and that side looks hopeless; aligned sizes are the ones
    warps, vectors and banks divide (bench/STRATEGIES.md, twentieth session)."""
    return [(j, np.array([int(v) & (int(v) - 1) == 0 for v in vals]))
            for j, vals in enumerate(values) if _sizes(vals)]


def aligned_rows(levels: np.ndarray, aligned: list) -> np.ndarray:
    """Which rows of level indices hold a power of two in every dimension `aligned` names."""
    ok = np.ones(len(levels), dtype=bool)
    for j, power_of_two in aligned:
        ok &= power_of_two[levels[:, j]]
    return ok


def norm_cdf(z: np.ndarray) -> np.ndarray:
    """Standard normal CDF (Abramowitz-Stegun 7.1.26 erf, |error| < 1.5e-7)."""
    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * erf)


def norm_pdf(z: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """EI for minimization of a quantity with predictive N(mean, sd^2), below `best`."""
    sd = np.maximum(sd, 1e-12)
    z = (best - mean) / sd
    return np.maximum((best - mean) * norm_cdf(z) + sd * norm_pdf(z), 0.0)


def matern52(r2: np.ndarray) -> np.ndarray:
    r = np.sqrt(np.maximum(r2, 0.0))
    return (1.0 + SQRT5 * r + (5.0 / 3.0) * r2) * np.exp(-SQRT5 * r)


def scaled_sqdist(a: np.ndarray, b: np.ndarray, ls: np.ndarray) -> np.ndarray:
    """Squared distances between rows of a and b, each dimension divided by its lengthscale."""
    a = a / ls
    b = b / ls
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(d2, 0.0)


def lower_solve(lower: np.ndarray, b: np.ndarray, block: int = 64) -> np.ndarray:
    """x with lower @ x = b, for a lower-triangular matrix: forward substitution a block of rows at a
    time (numpy has no triangular solve; np.linalg.solve factors the matrix again, which took most
    of a hyperparameter fit at 300 points)."""
    x = np.empty(len(b))
    for s in range(0, len(b), block):
        e = min(len(b), s + block)
        x[s:e] = np.linalg.solve(lower[s:e, s:e], b[s:e] - lower[s:e, :s] @ x[:s])
    return x


class GP:
    """GP on discrete levels: each dimension's kernel is a Matern-5/2 table over its level
    coordinates (rank / (levels - 1)); the joint kernel mixes their product (interactions) with
    their mean (an additive part that shares each parameter's effect across the space):
        k = (1 - a) * prod_j k_j + a * mean_j k_j.
    Zero mean on standardized targets; signal variance profiled out of the likelihood."""

    def __init__(self, coords: list, ls: np.ndarray, additive: float, nugget: float):
        self.coords = coords
        self.ls = np.asarray(ls, dtype=float)
        self.additive = float(additive)
        self.nugget = float(nugget)
        self.tables = [self._table(c, l) for c, l in zip(coords, self.ls)]

    @staticmethod
    def _table(c: np.ndarray, l: float) -> np.ndarray:
        """The kernel between every two levels of one column: its coordinates are a number per
        level, or a row per level (a choice's simplex)."""
        d = c[:, None] - c[None, :]
        return matern52((d / l) ** 2 if d.ndim == 2 else (d * d).sum(-1) / l ** 2)

    def cross(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Kernel between rows of level arrays a (m x d) and b (n x d)."""
        d = a.shape[1]
        prod = np.ones((len(a), len(b)))
        add = np.zeros((len(a), len(b)))
        for j in range(d):
            kj = self.tables[j][:, b[:, j]][a[:, j]]
            prod *= kj
            add += kj
        return (1.0 - self.additive) * prod + self.additive * add / max(d, 1)

    @staticmethod
    def _profiled_lml(k: np.ndarray, y: np.ndarray) -> float:
        n = len(y)
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            return -np.inf
        alpha = lower_solve(chol, y)
        s2 = max(float(alpha @ alpha) / n, 1e-12)
        return -0.5 * n * math.log(s2) - float(np.log(np.diag(chol)).sum())

    @classmethod
    def fit(cls, coords: list, levels: np.ndarray, y: np.ndarray, sweeps: int = 2,
            additive_grid: tuple = (0.0, 0.3, 0.7)) -> "GP":
        """Coordinate search over a log grid of per-dimension lengthscales, the additive share
        and the nugget.  Deterministic: the result depends on the data only."""
        n, d = levels.shape
        ls = np.full(d, 0.6)
        add, nugget = additive_grid[len(additive_grid) // 2], 1e-3
        if n >= 3 and d > 0:
            per = [[cls._table(coords[j], v)[levels[:, j]][:, levels[:, j]] for v in LENGTHSCALES] for j in range(d)]
            idx = [LENGTHSCALES.index(0.6)] * d
            eye = np.eye(n)

            def kernel(prod: np.ndarray, total: np.ndarray, add: float, nugget: float) -> np.ndarray:
                return (1 - add) * prod + add * total / d + nugget * eye

            start = [per[j][idx[j]] for j in range(d)]
            best = cls._profiled_lml(kernel(np.prod(start, axis=0), np.sum(start, axis=0), add, nugget), y)
            for _ in range(sweeps):
                changed = False
                # a trial changes one column's table: the product and sum of the others are made once
                # per column (the product from the columns before it, kept as the sweep goes, and those
                # after it, made at the sweep's start), not once per trial: d times fewer n x n products
                after = [np.ones((n, n))]
                for j in range(d - 1, 0, -1):
                    after.append(after[-1] * per[j][idx[j]])
                after.reverse()
                before, total = np.ones((n, n)), np.sum([per[j][idx[j]] for j in range(d)], axis=0)
                for j in range(d):
                    others, rest = before * after[j], total - per[j][idx[j]]
                    for g in range(len(LENGTHSCALES)):
                        if g == idx[j]:
                            continue
                        val = cls._profiled_lml(kernel(others * per[j][g], rest + per[j][g], add, nugget), y)
                        if val > best + 1e-9:
                            best, idx[j], changed = val, g, True
                    before, total = before * per[j][idx[j]], rest + per[j][idx[j]]
                prod = before
                for a in additive_grid:
                    if a != add:
                        val = cls._profiled_lml(kernel(prod, total, a, nugget), y)
                        if val > best + 1e-9:
                            best, add, changed = val, a, True
                for g in NUGGETS:
                    if g != nugget:
                        val = cls._profiled_lml(kernel(prod, total, add, g), y)
                        if val > best + 1e-9:
                            best, nugget, changed = val, g, True
                if not changed:
                    break
            ls = np.array([LENGTHSCALES[i] for i in idx])
        gp = cls(coords, ls, add, nugget)
        return gp.condition(levels, y)

    def condition(self, levels: np.ndarray, y: np.ndarray) -> "GP":
        n = len(y)
        self.levels = np.asarray(levels, dtype=int)
        k = self.cross(self.levels, self.levels) + self.nugget * np.eye(n)
        jitter = 0.0
        while True:
            try:
                chol = np.linalg.cholesky(k + jitter * np.eye(n))
                break
            except np.linalg.LinAlgError:
                jitter = max(1e-8, jitter * 10)
        linv = np.linalg.inv(chol)
        self.kinv = linv.T @ linv
        alpha_tri = linv @ y
        self.s2 = max(float(alpha_tri @ alpha_tri) / max(n, 1), 1e-12)
        self.alpha = self.kinv @ y
        return self

    def predict(self, levels: np.ndarray, with_cross: bool = False):
        """Posterior mean and standard deviation (of the latent function) at level rows
        (and the kernel between them and the conditioning rows, if asked)."""
        ks = self.cross(np.asarray(levels, dtype=int), self.levels)
        mean = ks @ self.alpha
        var = self.s2 * np.maximum(1.0 - ((ks @ self.kinv) * ks).sum(1), 1e-10)
        return (mean, np.sqrt(var), ks) if with_cross else (mean, np.sqrt(var))

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.cross(np.asarray(a, dtype=int), np.asarray(b, dtype=int))


def feasibility(sim: np.ndarray, ok: np.ndarray, prior_weight: float = 1.0) -> np.ndarray:
    """P(feasible) at each candidate: a kernel-weighted vote of the told points, shrunk toward
    the overall (Laplace-smoothed) feasible rate.  sim: candidates x told, ok: told (0/1)."""
    ok = np.asarray(ok, dtype=float)
    prior = (ok.sum() + 1.0) / (len(ok) + 2.0)
    w = sim.sum(1)
    return (prior_weight * prior + sim @ ok) / (prior_weight + w)


def warped(log_times: np.ndarray, warp: str = "copula", log_above: float = 0.0) -> tuple[np.ndarray, float]:
    """What the surrogate is fitted to, and the scale back to log time (so that an expected
    improvement reads as a fractional gain). "copula": the normal scores of the ranks, robust to
    a heavy tail of slow points; "log": standardized log time. With log_above > 0, a copula
    becomes the log when the median point is more than log_above times slower than the best: a
    landscape where most points are catastrophic (W6600's misaligned block widths without shared
    memory, a median 93x), where ranks flatten a 2x and a 100x point into neighbours while the
    magnitudes say which values cause the catastrophe (bench/STRATEGIES.md: within 1% at 100 in
    114 of 200 runs against 92; no other replayed space ever has such a median)."""
    y = np.asarray(log_times, dtype=float)
    sd = float(y.std())
    catastrophic = log_above > 0 and len(y) >= 3 and float(np.median(y) - y.min()) > math.log(log_above)
    if warp == "copula" and not catastrophic:
        return normal_scores(y), (sd if sd > 1e-12 else 1e-12)   # ~ log time per normal score
    sd = sd if sd > 1e-12 else 1.0
    return (y - float(y.mean())) / sd, sd


def training(done: list, max_train: int) -> tuple[list, np.ndarray]:
    """The (point, time) pairs a model sees, as points and log times: at most max_train, the best
    half of that plus the most recent."""
    keys = [k for k, _ in done]
    y = np.log(np.array([v for _, v in done]))
    if len(keys) > max_train:
        best = set(np.argsort(y)[: max_train // 2].tolist())
        recent = set(range(len(keys) - (max_train - len(best)), len(keys)))
        sel = sorted(best | recent)[: max_train]
        keys, y = [keys[i] for i in sel], y[sel]
    return keys, y


def normal_scores(y: np.ndarray) -> np.ndarray:
    """Normal quantiles of the (tie-averaged) ranks of y."""
    n = len(y)
    order = np.argsort(y, kind="stable")
    ranks = np.empty(n)
    ranks[order] = np.arange(n, dtype=float)
    for v in np.unique(y):          # average ties
        m = y == v
        if m.sum() > 1:
            ranks[m] = ranks[m].mean()
    u = (ranks + 0.5) / n
    return _probit(u)


def _probit(u: np.ndarray) -> np.ndarray:
    """Inverse standard normal CDF (Acklam's rational approximation, |rel error| < 1.2e-9)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549671010322563e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    u = np.clip(np.asarray(u, dtype=float), 1e-12, 1 - 1e-12)
    out = np.empty_like(u)
    lo, hi = u < 0.02425, u > 1 - 0.02425
    mid = ~(lo | hi)
    q = u[mid] - 0.5
    r = q * q
    out[mid] = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    for mask, sign in ((lo, 1.0), (hi, -1.0)):
        qq = np.sqrt(-2 * np.log(np.where(mask, u, 0.5)[mask] if sign > 0 else 1 - u[mask]))
        out[mask] = sign * (((((c[0] * qq + c[1]) * qq + c[2]) * qq + c[3]) * qq + c[4]) * qq + c[5]) / \
            ((((d[0] * qq + d[1]) * qq + d[2]) * qq + d[3]) * qq + 1)
    return out
