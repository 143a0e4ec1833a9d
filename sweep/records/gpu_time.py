"""What a configuration cost in GPU time, honest under overlap mode (sweep.node.overlap).

A job's "gpu" interval (result.json's intervals) is its measuring phase: verify and the
profiled runs. In exclusive mode it held the GPU alone for all of it; in overlap mode
several jobs' measuring phases run at once on one GPU, each using it only for its GPU
work, so adding up their intervals would count the GPU several times over. A
configuration's GPU-seconds are its share of the measuring phase's wall time instead: at
each moment the GPU's time is split evenly among the jobs measuring on it then, so the
shares of all the jobs of a GPU add up to the wall time its measuring phases covered
(context creation, which the driver serialises, and the waits for the token included:
the GPU is the sweep's for all of it). Jobs whose intervals never overlap (exclusive
mode) get exactly their interval.

    shares(intervals)      [(key, start, end)] -> each interval's share, seconds; `key` says which
                           GPU (host and GPU id), intervals of different keys never share
    Spent                  the same GPU-seconds as results arrive one by one: what each adds
                           (a learned strategy's GPU-second budget, sweep.pipeline.driver)
    gpu_key(env)           the key of a job's GPU from its result's env
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any


def shares(intervals: Sequence[tuple[Hashable, float, float]]) -> list[float]:
    """Each interval's share of its GPU's wall time (see the module's docstring)."""
    out = [0.0] * len(intervals)
    by_key: dict[Hashable, list[int]] = defaultdict(list)
    for n, (key, start, end) in enumerate(intervals):
        if end > start:
            by_key[key].append(n)
    for members in by_key.values():
        # A sweep over the starts and ends: between two events the open intervals split the time.
        events = sorted([(intervals[n][1], 1, n) for n in members] + [(intervals[n][2], 0, n) for n in members])
        active: set[int] = set()
        last = events[0][0]
        for t, opens, n in events:
            if active and t > last:
                for m in active:
                    out[m] += (t - last) / len(active)
            last = t
            (active.add if opens else active.discard)(n)
    return out


def gpu_key(env: Mapping[str, Any]) -> tuple[Any, Any]:
    """Which GPU a job measured on, from its result's env: (host, GPU uuid or name), as collect keys it."""
    return env.get("host"), env.get("gpu_uuid") or env.get("gpu")


class Spent:
    """GPU-seconds spent as jobs finish: `add` gives what one job's measuring interval adds to the
    wall time its GPU's measuring phases cover. Summed over the jobs, these are the sum of their
    `shares` (each GPU's covered wall time), known at every moment without waiting for the jobs
    still measuring beside them (whose shares would lower this one's later)."""

    def __init__(self) -> None:
        # each key's covered time as sorted, disjoint spans: a job's addition is found by bisection,
        # not by merging every earlier job's interval again (the driver adds one a result)
        self.spans: dict[Hashable, list[tuple[float, float]]] = defaultdict(list)

    def add(self, key: Hashable, start: float, end: float) -> float:
        if end <= start:
            return 0.0
        merged = self.spans[key]
        i = bisect.bisect_left(merged, (start,))
        if i and merged[i - 1][1] >= start:         # the span before reaches into this one
            i -= 1
        j, lo, hi, inside = i, start, end, 0.0
        while j < len(merged) and merged[j][0] <= end:
            a, b = merged[j]
            inside += max(0.0, min(b, end) - max(a, start))
            lo, hi, j = min(lo, a), max(hi, b), j + 1
        merged[i:j] = [(lo, hi)]
        return (end - start) - inside

    def of(self, result: Any) -> float | None:
        """What a finished job (a JobResult) cost the GPU: what its measuring interval adds (`add`);
        0 for a job that ran and never reached the GPU (a failed build); a result with no
        intervals at all (a replay's, or one from before them) its recorded total, as before."""
        interval = result.intervals.get("gpu")
        if isinstance(interval, (list, tuple)) and len(interval) == 2:
            return self.add(gpu_key(result.env), float(interval[0]), float(interval[1]))
        return 0.0 if result.intervals else result.timings.get("total")
