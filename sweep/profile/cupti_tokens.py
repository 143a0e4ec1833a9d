"""Overlap mode's evidence, from CUPTI captures (sweep-cupti/2 with `tok`, `copy` and `ctx`
records; cupti_inject.cpp documents them):

    summary(capture)         what a capture says of the GPU's use, for result.json's env["gpu_use"]:
                             GPU-busy seconds
                             (kernels, copies and memsets on the GPU timeline, merged, plus context
                             creation); in overlap mode, token windows, the seconds they held the GPU, the
                             seconds the run waited for it (other programs' GPU work) and for the node's
                             context gate (other programs' contexts), and how many GPU records ran
                             outside every window (0, or the token missed work)
    outside(capture)         the kernels, copies and memsets that ran outside every token window
    cross_overlaps(a, b)     GPU work of one capture that overlapped the other's in time, on the
                             wall clock (each capture's clock pairs place its CUPTI times there)

A process's kernels can only be measured alone when every one of them ran while it held the
token, and the token is the GPU's node-wide lock: `outside` is the per-process check, and
`cross_overlaps` the check across processes that the lock's exclusion should make empty.
"""

from __future__ import annotations

from typing import Any, Callable

from sweep.core.spans import covered
from sweep.profile.cupti_file import Capture

Span = tuple[int, int, str]      # start, end (CUPTI ns), what


def gpu_spans(cap: Capture) -> list[Span]:
    """Every finished kernel, copy and memset of the capture, in start order."""
    spans = [(k.start, k.end, f"kernel {k.kernel}") for k in cap.kernels if k.end > k.start > 0]
    spans += [(c.start, c.end, "memcpy" if c.kind == "M" else "memset") for c in cap.copies if c.end > c.start > 0]
    return sorted(spans)


def outside(cap: Capture) -> list[Span]:
    """The GPU records that did not run inside one token window (all of them without windows)."""
    windows = sorted((w.acquired, w.released) for w in cap.tokens)
    return [s for s in gpu_spans(cap) if not any(a <= s[0] and s[1] <= b for a, b in windows)]


def summary(cap: Capture) -> dict[str, Any]:
    """What the capture says of the GPU's use (see the module's docstring)."""
    busy = covered((a, b) for a, b, _ in gpu_spans(cap))
    contexts = sum(c.end - c.start for c in cap.contexts if c.end > c.start)
    out: dict[str, Any] = {"busy_s": round((busy + contexts) / 1e9, 6), "context_s": round(contexts / 1e9, 6)}
    if cap.tokens:
        late = outside(cap)
        out.update(windows=len(cap.tokens), held_s=round(sum(w.released - w.acquired for w in cap.tokens) / 1e9, 6),
                   outside=len(late))
        if all(w.requested is not None for w in cap.tokens):   # the run's waits for other programs' GPU work
            waits = sum(max(0, w.acquired - w.requested) for w in cap.tokens)
            waits += sum(max(0, c.start - c.requested) for c in cap.contexts if c.requested is not None)
            out["wait_s"] = round(waits / 1e9, 6)                 # ... and for their contexts (the gate)
        if late:
            out["outside_first"] = late[0][2]
    return out


def cross_overlaps(a: Capture, b: Capture) -> list[tuple[Span, Span]]:
    """Pairs of GPU records of `a` and `b` that overlapped in time, compared on the wall clock
    (each capture's CUPTI clock mapped through its clock pairs). A capture without clock pairs
    cannot be placed: ValueError."""
    left, right = _on_wall(a), _on_wall(b)
    hits, j = [], 0
    for s in left:
        while j < len(right) and right[j][1] <= s[0]:
            j += 1
        k = j
        while k < len(right) and right[k][0] < s[1]:
            if right[k][1] > s[0]:
                hits.append((s, right[k]))
            k += 1
    return hits


def _on_wall(cap: Capture) -> list[Span]:
    to_wall: Callable[[int], int] | None = cap.realtime()
    if to_wall is None:
        raise ValueError(f"{cap.path} has no clock pairs: its times cannot be compared with another process's")
    return sorted((to_wall(s), to_wall(e), what) for s, e, what in gpu_spans(cap))
