"""When to stop timing one configuration: nvbench's stdrel criterion, made robust.

nvbench's stdrel criterion adds samples until their relative standard deviation
is under --max-noise (0.5%), or, for kernels that are noisier than that, until
the noise estimate itself has settled (its spread over the last samples under
5%), or its timeout. `StoppingRule` does the same with the robust noise of
samples.py (IQR / median, as nvbench's "ir/relative") and records why it
stopped, in this order of precedence:

    converged    relative noise under max_noise (with at least min_samples)
    plateau      the noise estimate stopped moving: over the last plateau_window
                 samples its values (taken at 5 evenly spaced sample counts) span
                 less than plateau_tolerance of the current value
    max_samples  max_samples taken
    budget       budget_s seconds spent

The noise is a spread, not the error of the median: it does not shrink as
samples are added, it settles at the kernel's own noise. So a noisy kernel
stops at "plateau", which is the expected way out, not a failure; the
comparison (compare.py) is what uses the sample count to separate candidates.

The rule is pure: `check(samples, elapsed_s)` looks only at what it is given,
so a caller can ask after every sample or every batch; `sample_until` is the
loop for a caller that takes one sample at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from sweep.core.errors import SweepError
from sweep.stats.samples import MIN_SAMPLES_FOR_NOISE, summarize

STOP_REASONS = ("converged", "plateau", "max_samples", "budget")
PLATEAU_POINTS = 5    # sample counts at which the noise is compared across a plateau window


@dataclass(frozen=True, slots=True)
class Stopped:
    """Why sampling of one configuration ended.

    samples: samples taken. noise: relative noise reached (IQR / median, a
    fraction; None when unknown). reason: one of STOP_REASONS. elapsed_s: seconds
    spent sampling.
    """

    samples: int
    noise: float | None
    reason: str
    elapsed_s: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class StoppingRule:
    """Settings of the adaptive stopping rule (see the module docstring).

    max_noise: target relative noise (fraction; 0.005 is 0.5%, nvbench's default).
    min_samples: never stop as converged/plateau before this many samples.
    max_samples: stop after this many samples.
    budget_s: stop after this many seconds of sampling.
    plateau_window: samples over which the noise estimate must have settled.
    plateau_tolerance: how little it may move over the window (fraction of its value).
    """

    max_noise: float = 0.005
    min_samples: int = 5
    max_samples: int = 1000
    budget_s: float = 15.0
    plateau_window: int = 64
    plateau_tolerance: float = 0.05

    def __post_init__(self) -> None:
        bad = []
        if not self.max_noise > 0:
            bad.append(f"max_noise={self.max_noise} (a fraction > 0, e.g. 0.005 for 0.5%)")
        if self.min_samples < MIN_SAMPLES_FOR_NOISE:
            bad.append(f"min_samples={self.min_samples} (at least {MIN_SAMPLES_FOR_NOISE}: fewer say nothing of the noise)")
        if self.max_samples < self.min_samples:
            bad.append(f"max_samples={self.max_samples} (at least min_samples={self.min_samples})")
        if not self.budget_s > 0:
            bad.append(f"budget_s={self.budget_s} (seconds > 0)")
        if self.plateau_window < PLATEAU_POINTS - 1:
            bad.append(f"plateau_window={self.plateau_window} (at least {PLATEAU_POINTS - 1} samples)")
        if not self.plateau_tolerance > 0:
            bad.append(f"plateau_tolerance={self.plateau_tolerance} (a fraction > 0, e.g. 0.05)")
        if bad:
            raise SweepError("stopping rule: bad " + "; ".join(bad))

    def plateaued(self, samples: Sequence[float]) -> bool:
        """The noise estimate spans less than plateau_tolerance of its value over the last plateau_window samples."""
        n = len(samples)
        if n < max(self.min_samples, MIN_SAMPLES_FOR_NOISE) + self.plateau_window:
            return False
        step = self.plateau_window / (PLATEAU_POINTS - 1)
        noises = [summarize(samples[: n - round(k * step)]).noise for k in range(PLATEAU_POINTS)]
        if any(v is None for v in noises) or noises[0] == 0:
            return False
        return (max(noises) - min(noises)) / noises[0] < self.plateau_tolerance

    def check(self, samples: Sequence[float], elapsed_s: float) -> Stopped | None:
        """None to keep sampling, or the Stopped record. samples: the times so far; elapsed_s: seconds spent."""
        n = len(samples)
        noise = summarize(samples).noise if n else None
        reason = None
        if n >= self.min_samples and noise is not None and noise < self.max_noise:
            reason = "converged"
        elif n >= self.min_samples and self.plateaued(samples):
            reason = "plateau"
        elif n >= self.max_samples:
            reason = "max_samples"
        elif elapsed_s >= self.budget_s:
            reason = "budget"
        return None if reason is None else Stopped(n, noise, reason, float(elapsed_s))

    def to_dict(self) -> dict:
        return asdict(self)


def sample_until(rule: StoppingRule, take: Callable[[], float],
                 clock: Callable[[], float] = time.monotonic) -> tuple[list[float], Stopped]:
    """Call `take()` for one sample (a time, e.g. ns) until `rule` says stop; the samples and the Stopped record.

    clock: seconds (time.monotonic by default; tests pass a fake one).
    """
    start, samples = clock(), []
    while True:
        samples.append(float(take()))
        stopped = rule.check(samples, clock() - start)
        if stopped is not None:
            return samples, stopped
