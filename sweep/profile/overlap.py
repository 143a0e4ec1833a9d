"""The time a kernel adds to its stream, when kernels on one stream overlap.

In ordinary stream order a kernel starts after the one before it on its stream
has ended, and its GPU span (end - start) is its time. Under Programmatic
Dependent Launch (sm_90: cudaLaunchAttributeProgrammaticStreamSerialization and
`griddepcontrol.wait` in the kernel) a kernel's blocks may start while its
predecessor still runs, and wait for it: its span then holds time the
predecessor already counts, and summing spans would count it twice (a launch
size whose blocks start earlier would look slower). So, per stream (device,
context, stream), kernels ordered by GPU start (ties: by end) are timed from the
latest end of the earlier ones:

    duration = end - max(start, latest end of the earlier kernels on the stream)

Kernels on different streams may truly run at once and are never clipped against
each other. Without overlap (start >= every earlier end) the duration is end -
start exactly, as before. nsys (sweep.profile.nsys) and cupti
(sweep.profile.cupti_parse) both time their launches through `clip`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import NamedTuple

Span = tuple[Hashable, int, int]    # (stream key, GPU start, GPU end) of one kernel execution, ns


class Clipped(NamedTuple):
    """One kernel's time on its stream, and the part of its span clipped off as overlap."""

    duration_ns: int            # end - max(start, latest earlier end on the stream); never negative
    overlap_ns: int             # (end - start) - duration_ns: 0 without overlap


def clip(spans: Iterable[Span]) -> list[Clipped]:
    """Each span's time on its stream (see the module docstring), in the order given.

    A kernel that lies entirely inside an earlier kernel's span on its stream
    (it started after, and ended before, that one ended: possible under PDL when
    a short kernel's blocks start early and finish their work before its
    predecessor's last block) adds no time: 0, its whole span counted as overlap.
    """
    spans = list(spans)
    out: list[Clipped] = [Clipped(0, 0)] * len(spans)
    busy_until: dict[Hashable, int] = {}        # per stream: the latest end so far
    for n in sorted(range(len(spans)), key=lambda n: (spans[n][1], spans[n][2])):
        stream, start, end = spans[n]
        before = busy_until.get(stream, start)
        duration = max(0, end - max(start, before))
        out[n] = Clipped(duration, max(0, end - start) - duration)
        busy_until[stream] = max(before, end)
    return out


# Back-to-back kernels of a replayed CUDA graph, launched the ordinary way, show 32-33 ns of
# "overlap" now and then (an H100 capture, tests/data/h100/overlap): timestamp granularity, not
# early starts, which under PDL were 1.2-5.8 us there. Such slivers are clipped like any overlap
# but not named in the note, which would otherwise claim PDL for a program that does not use it.
NOTICEABLE_NS = 500


def note(overlaps: Iterable[float]) -> dict[str, str]:
    """For a result's env, from the timed launches' overlap_ns: {"overlap": "N launches started
    before ..."} when one overlapped a kernel ahead on its stream by NOTICEABLE_NS or more, {}
    otherwise (every capture without PDL: a result's env is then as before)."""
    clipped = [x for x in overlaps if x >= NOTICEABLE_NS]
    if not clipped:
        return {}
    n = len(clipped)
    return {"overlap": f"{n} launch{'es' if n != 1 else ''} started before the kernel ahead on their stream ended "
                       f"(programmatic dependent launch); {sum(clipped) / 1000:.1f} us of their GPU spans not "
                       f"counted, as the earlier kernels' time"}
