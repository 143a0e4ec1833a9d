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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence


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
