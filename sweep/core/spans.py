"""The time a set of intervals covers: GPU-busy time from a capture's records, a GPU's
occupancy from its jobs' measuring intervals, a bench's wall-time split. Intervals that
overlap count once."""

from __future__ import annotations

from collections.abc import Iterable


def covered(spans: Iterable[tuple[float, float]], lo: float | None = None, hi: float | None = None) -> float:
    """The length of the union of `spans` ((start, end) pairs, any unit), clipped to [lo, hi]
    where given; empty and reversed spans add nothing. Integer spans give an integer."""
    total, end = 0, None
    for a, b in sorted(spans):
        if lo is not None:
            a = max(a, lo)
        if hi is not None:
            b = min(b, hi)
        if b <= a:
            continue
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total
