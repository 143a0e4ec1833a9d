"""Numpy-only surrogate pieces for sweep.plan.learning: a Gaussian process with a
Matern-5/2 ARD kernel on normalized ordinal encodings, its hyperparameters fitted by
a deterministic coordinate search on the (profiled) marginal likelihood, expected
improvement, and a kernel-weighted feasibility estimate.

Pure module: stdlib + numpy only.
"""

from __future__ import annotations

import math

import numpy as np

SQRT5 = math.sqrt(5.0)
LENGTHSCALES = (0.08, 0.15, 0.3, 0.6, 1.2, 2.5, 8.0)   # in units of the [0, 1] rank encoding
NUGGETS = (1e-6, 1e-4, 1e-3, 1e-2, 5e-2, 0.2)           # noise / signal variance ratio


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


class GP:
    """Zero-mean GP on standardized targets; signal variance profiled out of the likelihood."""

    def __init__(self, lengthscales: np.ndarray, nugget: float):
        self.ls = np.asarray(lengthscales, dtype=float)
        self.nugget = float(nugget)

    # -- hyperparameters -------------------------------------------------------------
    @staticmethod
    def _profiled_lml(diff2: np.ndarray, y: np.ndarray, ls: np.ndarray, nugget: float) -> float:
        n = len(y)
        r2 = np.tensordot(1.0 / (ls * ls), diff2, axes=1)
        k = matern52(r2) + nugget * np.eye(n)
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            return -np.inf
        alpha = np.linalg.solve(chol, y)
        s2 = max(float(alpha @ alpha) / n, 1e-12)
        return -0.5 * n * math.log(s2) - float(np.log(np.diag(chol)).sum())

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, sweeps: int = 2) -> "GP":
        """Coordinate search over a log grid of lengthscales (one per dimension) and the nugget.

        Deterministic: the result depends on (x, y) only."""
        n, d = x.shape
        ls = np.full(d, 0.6)
        nugget = 1e-3
        if n >= 3 and d > 0:
            diff2 = (x[None, :, :] - x[:, None, :]) ** 2       # n x n x d
            diff2 = np.moveaxis(diff2, 2, 0)                    # d x n x n
            best = cls._profiled_lml(diff2, y, ls, nugget)
            for _ in range(sweeps):
                changed = False
                for j in range(d):
                    for v in LENGTHSCALES:
                        if v == ls[j]:
                            continue
                        trial = ls.copy()
                        trial[j] = v
                        val = cls._profiled_lml(diff2, y, trial, nugget)
                        if val > best + 1e-9:
                            best, ls, changed = val, trial, True
                for g in NUGGETS:
                    if g == nugget:
                        continue
                    val = cls._profiled_lml(diff2, y, ls, g)
                    if val > best + 1e-9:
                        best, nugget, changed = val, g, True
                if not changed:
                    break
        gp = cls(ls, nugget)
        gp.condition(x, y)
        return gp

    # -- posterior -------------------------------------------------------------------
    def condition(self, x: np.ndarray, y: np.ndarray) -> "GP":
        n = len(y)
        self.x = np.asarray(x, dtype=float)
        k = matern52(scaled_sqdist(self.x, self.x, self.ls)) + self.nugget * np.eye(n)
        jitter = 0.0
        while True:
            try:
                chol = np.linalg.cholesky(k + jitter * np.eye(n))
                break
            except np.linalg.LinAlgError:
                jitter = max(1e-8, jitter * 10)
        self.kinv = np.linalg.inv(chol).T @ np.linalg.inv(chol)
        alpha_tri = np.linalg.solve(chol, y)
        self.s2 = max(float(alpha_tri @ alpha_tri) / max(n, 1), 1e-12)
        self.alpha = self.kinv @ y
        return self

    def predict(self, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (of the latent function) at rows of xs."""
        ks = matern52(scaled_sqdist(np.asarray(xs, dtype=float), self.x, self.ls))
        mean = ks @ self.alpha
        var = self.s2 * np.maximum(1.0 - ((ks @ self.kinv) * ks).sum(1), 1e-10)
        return mean, np.sqrt(var)

    def similarity(self, xs: np.ndarray, xo: np.ndarray) -> np.ndarray:
        return matern52(scaled_sqdist(np.asarray(xs, dtype=float), np.asarray(xo, dtype=float), self.ls))


def feasibility(sim: np.ndarray, ok: np.ndarray, prior_weight: float = 1.0) -> np.ndarray:
    """P(feasible) at each candidate: a kernel-weighted vote of the told points, shrunk toward
    the overall (Laplace-smoothed) feasible rate.  sim: candidates x told, ok: told (0/1)."""
    ok = np.asarray(ok, dtype=float)
    prior = (ok.sum() + 1.0) / (len(ok) + 2.0)
    w = sim.sum(1)
    return (prior_weight * prior + sim @ ok) / (prior_weight + w)
