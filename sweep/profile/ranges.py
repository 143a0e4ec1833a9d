"""Timed iterations from NVTX ranges: which range a kernel launch was issued in.

The rule (the nsys backend's, see sweep/profile/nsys.py): the GPU runs behind
the CPU, so a kernel is placed by the CPU start of its launch call, not by its
GPU time. It belongs to iteration i when that call started inside the i-th
range of the iteration name opened on the same thread (the innermost, if they
nest). Ranges are numbered by start time; a range holding no launch is not an
iteration (it would report zero for every shape and fake a spread). Launches
in no range, or whose call was not traced, are left out.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import accumulate
from typing import Sequence


@dataclass(frozen=True, slots=True)
class Range:
    """A closed NVTX range: CPU start and end (ns) and the thread that opened it."""

    start: int
    end: int
    tid: int | None


def attribute(calls: Sequence[tuple[int | None, int | None]], ranges: Sequence[Range]) -> tuple[list[int | None], int]:
    """For each launch call (CPU start ns, thread id), its timed iteration (0-based) or None.

    Returns the iteration per call and how many iterations held a launch.
    """
    by_thread: dict[int | None, list[tuple[int, Range]]] = {}
    for index, r in enumerate(sorted(ranges, key=lambda r: (r.start, r.end))):
        by_thread.setdefault(r.tid, []).append((index, r))
    finders = {tid: RangeFinder(rs) for tid, rs in by_thread.items()}
    found: list[int | None] = []
    for start, tid in calls:
        finder = finders.get(tid)
        found.append(finder.find(start) if finder is not None and start is not None else None)
    used = {index: i for i, index in enumerate(sorted({f for f in found if f is not None}))}
    return [None if f is None else used[f] for f in found], len(used)


class RangeFinder:
    """Which of one thread's ranges holds a time: the innermost, if they nest."""

    def __init__(self, ranges: list[tuple[int, Range]]):
        self._ranges = ranges  # (index, range), sorted by start
        self._starts = [r.start for _, r in ranges]
        # The latest end among ranges[:i+1] lets a search stop as soon as no
        # earlier range can still be open.
        self._max_end = list(accumulate((r.end for _, r in ranges), max))

    def find(self, t: int) -> int | None:
        i = bisect.bisect_right(self._starts, t) - 1
        while i >= 0 and self._max_end[i] > t:
            index, r = self._ranges[i]
            if r.start <= t < r.end:
                return index
            i -= 1
        return None
