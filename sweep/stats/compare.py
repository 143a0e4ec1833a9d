"""Is one configuration faster than another, beyond the noise? A rank-based answer.

`compare(best, other)` estimates the relative margin other / best - 1 and a
confidence interval for it, from the two sample lists (times, any one unit):

    unpaired  (samples from separate runs, e.g. the sweep's jobs): the
              Hodges-Lehmann shift of log(other) against log(best), i.e. the
              median of all m*n pairwise log-ratios, with the distribution-free
              interval from the Mann-Whitney statistic (exact null distribution
              up to EXACT_MW_MAX_PAIRS pairs, normal approximation beyond).
    paired    (interleaved rounds, one sample of each per round, see race.py):
              the Hodges-Lehmann centre of the per-round log-ratios (median of
              their Walsh averages) with the Wilcoxon signed-rank interval
              (exact up to EXACT_SIGNED_RANK_MAX rounds). Pairing by round
              cancels slow drift (clocks, temperature) that both candidates share.

Why ranks and not a bootstrap: both intervals are exact under the null
hypothesis "the two sample sets come from one distribution" whatever its shape,
need no random numbers, and are honest with few samples. A percentile bootstrap
of the difference of medians is not: with 3 samples a side that do not overlap
(which happens 1 time in 10 with no difference at all) every resample puts one
median below the other and it reports 100% confidence. The exact interval at
95% has no finite bound with 3 v 3 samples (the most extreme ordering has
probability 1/20 > 2.5%), so such evidence is a "tie", which is what it is.
Working on log times makes the margin relative and the interval scale-free.

verdict: "unknown" when either side has fewer than MIN_SAMPLES_FOR_NOISE
samples (never beyond noise); "faster" when the interval lies above 0 (best is
faster than other), "slower" when it lies below 0, else "tie".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from sweep.stats.samples import MIN_SAMPLES_FOR_NOISE

EXACT_MW_MAX_PAIRS = 2500      # m*n up to this: exact Mann-Whitney null distribution
EXACT_SIGNED_RANK_MAX = 400    # rounds up to this: exact signed-rank null distribution
VERDICTS = ("faster", "slower", "tie", "unknown")


@dataclass(frozen=True, slots=True)
class Comparison:
    """`best` against `other`: relative margin (other / best - 1, a fraction) and its interval.

    margin > 0 says best is faster. ci_low/ci_high bound the margin at
    `confidence` (-inf/inf when the samples are too few for that confidence;
    None when the verdict is "unknown"). n_best/n_other: samples on each side.
    method: "mann-whitney" (unpaired) or "signed-rank" (paired by round).
    """

    margin: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    verdict: str
    n_best: int
    n_other: int
    method: str

    @property
    def beyond_noise(self) -> bool:
        """The interval excludes 0: one side is faster beyond the noise (only with enough samples)."""
        return self.verdict in ("faster", "slower")

    def to_dict(self) -> dict:
        def finite(v: float | None) -> float | None:
            return v if v is not None and math.isfinite(v) else None
        return {"margin": self.margin, "ci_low": finite(self.ci_low), "ci_high": finite(self.ci_high),
                "confidence": self.confidence, "verdict": self.verdict, "n_best": self.n_best,
                "n_other": self.n_other, "method": self.method}


def _logs(samples: Sequence[float], side: str) -> np.ndarray:
    x = np.asarray(samples, dtype=float).ravel()
    if x.size == 0:
        raise ValueError(f"compare needs at least one {side} sample")
    if not np.all(np.isfinite(x) & (x > 0)):
        raise ValueError(f"{side} samples must be positive finite times; got {list(samples)!r}")
    return np.log(x)


@lru_cache(maxsize=256)
def _mann_whitney_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u), u = 0..m*n, for U the Mann-Whitney count with no true difference (m <= n)."""
    # P[i] is the distribution for sizes (i, j) while j runs up to n:
    # p(i, j)[u] = i/(i+j) p(i-1, j)[u-j] + j/(i+j) p(i, j-1)[u]  (is the largest value an x or a y?)
    dists = [np.ones(1) for _ in range(m + 1)]
    for j in range(1, n + 1):
        new = [np.ones(1)]
        for i in range(1, m + 1):
            d = np.zeros(i * j + 1)
            d[j:] += i / (i + j) * new[i - 1]
            d[: dists[i].size] += j / (i + j) * dists[i]
            new.append(d)
        dists = new
    return np.cumsum(dists[m])


@lru_cache(maxsize=512)
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(W+ <= w), w = 0..n(n+1)/2, for the Wilcoxon signed-rank statistic with a symmetric null."""
    p = np.ones(1)
    for i in range(1, n + 1):
        d = np.zeros(p.size + i)
        d[: p.size] += p / 2
        d[i:] += p / 2
        p = d
    return np.cumsum(p)


def _tail_count(cdf: np.ndarray, tail: float) -> int:
    """The largest c with P(stat <= c) <= tail, or -1 when even P(stat = 0) exceeds it."""
    return int(np.searchsorted(cdf, tail * (1 + 1e-12), side="right")) - 1


def _normal_tail_count(mean: float, var: float, tail: float) -> int:
    z = NormalDist().inv_cdf(1 - tail)
    return max(-1, math.floor(mean - 0.5 - z * math.sqrt(var)))


def mann_whitney_count(m: int, n: int, tail: float) -> int:
    """Order-statistic offset c of the unpaired interval: [D_(c+1), D_(mn-c)] of the sorted pairwise differences."""
    if m * n <= EXACT_MW_MAX_PAIRS:
        return _tail_count(_mann_whitney_cdf(min(m, n), max(m, n)), tail)
    return _normal_tail_count(m * n / 2, m * n * (m + n + 1) / 12, tail)


def signed_rank_count(n: int, tail: float) -> int:
    """Order-statistic offset c of the paired interval: [A_(c+1), A_(N-c)] of the sorted Walsh averages."""
    if n <= EXACT_SIGNED_RANK_MAX:
        return _tail_count(_signed_rank_cdf(n), tail)
    return _normal_tail_count(n * (n + 1) / 4, n * (n + 1) * (2 * n + 1) / 24, tail)


def compare(best: Sequence[float], other: Sequence[float], *, alpha: float = 0.05,
            paired: bool = False) -> Comparison:
    """Relative margin of `other` over `best` (other / best - 1) with a (1 - alpha) interval.

    best, other: times (any one unit, e.g. ns per iteration), positive. paired:
    best[r] and other[r] were taken in the same interleaved round r (equal lengths).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1); got {alpha}")
    lb, lo = _logs(best, "best"), _logs(other, "other")
    if paired:
        if lb.size != lo.size:
            raise ValueError(f"paired samples need one of each per round: {lb.size} best, {lo.size} other")
        d = lo - lb
        iu = np.triu_indices(d.size)
        pool = np.sort((d[:, None] + d[None, :])[iu] / 2)
        method = "signed-rank"
    else:
        pool = np.sort(np.subtract.outer(lo, lb).ravel())
        method = "mann-whitney"
    margin = float(np.expm1(np.median(pool)))
    if min(lb.size, lo.size) < MIN_SAMPLES_FOR_NOISE:
        return Comparison(margin, None, None, 1 - alpha, "unknown", int(lb.size), int(lo.size), method)
    tail = alpha / 2
    c = signed_rank_count(lb.size, tail) if paired else mann_whitney_count(lb.size, lo.size, tail)
    if c < 0:
        low, high = -math.inf, math.inf
    else:
        low, high = float(np.expm1(pool[c])), float(np.expm1(pool[pool.size - 1 - c]))
    verdict = "faster" if low > 0 else "slower" if high < 0 else "tie"
    return Comparison(margin, low, high, 1 - alpha, verdict, int(lb.size), int(lo.size), method)
