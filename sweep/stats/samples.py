"""What a list of timings says: robust summary, where its noise comes from, throttled samples.

Noise is measured, never assumed. A program's per-iteration totals are the
samples when one run has at least MIN_SAMPLES_FOR_NOISE iterations; with fewer,
the program is run again (`default_repeats` times) and the runs' totals are
pooled; with fewer than MIN_SAMPLES_FOR_NOISE samples in all the noise is
unknown, and unknown noise is never "beyond noise" (see `compare`).

Robust statistics: the centre is the median and the spread the interquartile
range, both with numpy's default "linear" quantiles (Hyndman-Fan type 7). The
relative noise is IQR / median, the measure nvbench's stdrel criterion tracks
in its robust form ("ir/relative"). For normal noise IQR is 1.349 sigma, so a
relative noise of 0.5% is a relative standard deviation of about 0.37%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

MIN_SAMPLES_FOR_NOISE = 3    # fewer samples: the noise is unknown
MIN_REPEAT_SAMPLES = 5       # repeated runs give a short program at least this many samples
THROTTLE_THRESHOLD = 0.75    # a sample whose SM clock is below this share of the default clock is dropped


def _values(samples: Sequence[float], what: str = "samples") -> np.ndarray:
    x = np.asarray(samples, dtype=float).ravel()
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} must be finite numbers; got {list(samples)!r}")
    return x


@dataclass(frozen=True, slots=True)
class Summary:
    """Robust summary of one sample list (same unit as the samples, e.g. ns per iteration).

    noise is the relative noise IQR / median (a fraction: 0.005 is 0.5%), or None
    ("unknown") with fewer than MIN_SAMPLES_FOR_NOISE samples; q1, q3 and iqr are
    None then too.
    """

    n: int
    median: float
    q1: float | None
    q3: float | None
    iqr: float | None
    noise: float | None
    min: float
    max: float

    @property
    def noise_known(self) -> bool:
        return self.noise is not None

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(samples: Sequence[float]) -> Summary:
    """Median, quartiles, IQR, relative noise (IQR / median), min and max of `samples`."""
    x = _values(samples)
    if x.size == 0:
        raise ValueError("summarize needs at least one sample")
    median = float(np.median(x))
    if x.size < MIN_SAMPLES_FOR_NOISE:
        return Summary(int(x.size), median, None, None, None, None, float(x.min()), float(x.max()))
    q1, q3 = (float(q) for q in np.percentile(x, [25.0, 75.0]))
    iqr = q3 - q1
    noise = iqr / median if median > 0 else None
    return Summary(int(x.size), median, q1, q3, iqr, noise, float(x.min()), float(x.max()))


def default_repeats(iterations: int, min_samples: int = MIN_REPEAT_SAMPLES) -> int:
    """How many times to run a program of `iterations` timed iterations so its noise is measured.

    One run when it has at least MIN_SAMPLES_FOR_NOISE iterations (their totals
    are the samples); otherwise enough runs for `min_samples` pooled samples: a
    one-iteration program is run 5 times, a two-iteration one 3 times.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1; got {iterations}")
    if iterations >= MIN_SAMPLES_FOR_NOISE:
        return 1
    return math.ceil(min_samples / iterations)


@dataclass(frozen=True, slots=True)
class NoiseSamples:
    """The samples a configuration's noise is measured from.

    samples_ns: per-iteration totals (ns), pooled over the runs.
    source: "iterations" (one run, at least MIN_SAMPLES_FOR_NOISE iterations),
            "runs" (several runs pooled: includes run-to-run spread) or
            "unknown" (fewer than MIN_SAMPLES_FOR_NOISE samples in all).
    """

    samples_ns: tuple[float, ...]
    source: str
    runs: int

    def summary(self) -> Summary:
        return summarize(self.samples_ns)

    def to_dict(self) -> dict:
        return {"samples_ns": list(self.samples_ns), "source": self.source, "runs": self.runs}


def noise_samples(runs: Sequence[Sequence[float]]) -> NoiseSamples:
    """Pick the noise basis from `runs`: one entry per program run, each that run's per-iteration totals (ns)."""
    pooled = tuple(float(v) for run in runs for v in _values(run, "per-iteration totals"))
    if len(pooled) < MIN_SAMPLES_FOR_NOISE:
        source = "unknown"
    elif len(runs) == 1:
        source = "iterations"
    else:
        source = "runs"
    return NoiseSamples(pooled, source, len(runs))


@dataclass(frozen=True, slots=True)
class Unthrottled:
    """Samples left after dropping those taken while the GPU throttled.

    threshold: the SM clock below which a sample was dropped (unit of the clock
    readings, e.g. MHz): THROTTLE_THRESHOLD times the default clock.
    """

    samples: tuple[float, ...]
    dropped: int
    threshold: float

    @property
    def kept(self) -> int:
        return len(self.samples)

    def to_dict(self) -> dict:
        return {"samples": list(self.samples), "kept": self.kept, "dropped": self.dropped, "threshold": self.threshold}


def drop_throttled(samples: Sequence[float], sm_clocks: Sequence[float], default_clock: float,
                   threshold: float = THROTTLE_THRESHOLD) -> Unthrottled:
    """Drop the samples whose SM clock reading is below `threshold` x `default_clock` (nvbench's rule, 75%).

    sm_clocks[i] is the SM clock measured while samples[i] was taken, in the unit
    of default_clock (the application or maximum SM clock). A reading that is not a
    finite number says nothing about throttling: that sample is kept.
    """
    if len(samples) != len(sm_clocks):
        raise ValueError(f"one SM clock reading per sample: {len(samples)} samples, {len(sm_clocks)} readings")
    if not default_clock > 0 or not 0 < threshold <= 1:
        raise ValueError(f"default_clock must be > 0 and threshold in (0, 1]; got {default_clock}, {threshold}")
    limit = threshold * default_clock
    kept = tuple(float(s) for s, c in zip(samples, sm_clocks) if not (math.isfinite(c) and c < limit))
    return Unthrottled(kept, len(samples) - len(kept), limit)
