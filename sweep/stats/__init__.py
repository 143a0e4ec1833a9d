"""Evidence for picking launch sizes: pure statistics, no GPU.

    samples   what a list of timings says: `summarize` (median, quartiles, IQR,
              relative noise IQR / median), where the noise comes from
              (`noise_samples`, `default_repeats`), `drop_throttled`
    stopping  when to stop timing one configuration (`StoppingRule`, nvbench's
              stdrel criterion made robust), recorded as `Stopped`
    compare   is one configuration faster than another beyond the noise:
              rank-based interval of the relative margin (`compare`)
    race      certify a group's pick by racing its top candidates interleaved
              (`contenders`, `Race`, `RaceResult`), with a documented tie-break

Rule that holds throughout: fewer than MIN_SAMPLES_FOR_NOISE samples means the
noise is unknown, and unknown noise is never "beyond noise".
"""

from __future__ import annotations

from sweep.stats.compare import Comparison, compare
from sweep.stats.race import RACE_TOP, Entrant, Race, RaceResult, contenders, look_rounds, tie_break
from sweep.stats.samples import (MIN_REPEAT_SAMPLES, MIN_SAMPLES_FOR_NOISE, THROTTLE_THRESHOLD, NoiseSamples,
                                 Summary, Unthrottled, default_repeats, drop_throttled, noise_samples, summarize)
from sweep.stats.stopping import Stopped, StoppingRule, sample_until

__all__ = [
    "MIN_REPEAT_SAMPLES", "MIN_SAMPLES_FOR_NOISE", "RACE_TOP", "THROTTLE_THRESHOLD",
    "Comparison", "Entrant", "NoiseSamples", "Race", "RaceResult", "Stopped", "StoppingRule", "Summary",
    "Unthrottled", "compare", "contenders", "default_repeats", "drop_throttled", "look_rounds", "noise_samples",
    "sample_until", "summarize", "tie_break",
]
