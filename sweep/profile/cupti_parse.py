"""Turning a CUPTI capture (sweep-cupti/2 or /1, read by cupti_file) into Measurements.

Attribution to timed iterations follows the nsys backend (sweep/profile/ranges.py):
with NVTX ranges named "iteration", a launch counts in the range its launch call
started in, on the same thread, and launches outside them (warm-up, checks) are
left out; without such ranges, every launch counts in one single iteration.
NVTX ranges are seen only when the program opens them after initialising CUDA.

Each timed iteration's window is when the GPU ran its launches (its first one's
start to its last one's end), mapped to the wall clock through the capture's
clock pairs (Capture.realtime); a sweep-cupti/1 capture has none, so no windows.

A launch's duration is the time it adds to its stream (sweep.profile.overlap):
end - start, less any part of it spent while an earlier kernel on the same
(device, context, stream) still ran, as under programmatic dependent launch,
whose kernels start before their predecessor ends and wait for it. Without PDL
kernels on a stream never overlap and the duration is end - start. Every
finished kernel of the capture is on that timeline (warm-up and checks too);
kernels on different streams are never clipped against each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.core.errors import SweepError
from sweep.profile.base import Launch, Measurement, Window, aggregate, iteration_windows
from sweep.profile.cupti_file import Failure, KernelRecord, read_capture
from sweep.profile.overlap import Clipped, Span, clip
from sweep.profile.cupti_tokens import summary as gpu_summary
from sweep.profile.ranges import attribute

RERUN = "re-run the program and check its log"


# ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class KernelResources:
    """What one kernel used at one launch shape, as CUPTI reported it (per launch)."""

    kernel: str
    kernel_full: str            # demangled, with template arguments and parameters
    mangled: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int
    static_shared_bytes: int
    dynamic_shared_bytes: int
    local_bytes_per_thread: int
    launches: int               # launches with these resources, counted or not (warm-up, checks)

    @property
    def shared_bytes(self) -> int:
        return self.static_shared_bytes + self.dynamic_shared_bytes


@dataclass(frozen=True, slots=True)
class ParsedCapture:
    """A capture file read: the Measurements and what else the file says."""

    measurements: tuple[Measurement, ...]
    resources: tuple[KernelResources, ...]
    complete: bool              # an `end` line: the program exited and the final flush ran
    signal: int | None          # the fatal signal the library saw, if one arrived
    iterations: int             # timed iterations (1 when the program has no NVTX iteration ranges)
    launches: int               # kernel executions in the file
    counted: int                # of those, in the Measurements (inside timed iterations)
    unfinished: int             # kernel records without timestamps (still queued at a crash)
    partial_iterations: int     # iteration ranges left out because a launch in them never finished
    unclosed_ranges: int        # iteration ranges opened and never closed (a crash inside one)
    dropped: int                # records CUPTI dropped (its buffers were full)
    pid: int | None
    failures: tuple[Failure, ...] = ()     # launches the runtime refused (their size and error)
    timed_launches: tuple[Launch, ...] = ()   # the launches the Measurements aggregate
    windows: tuple[Window, ...] | None = None  # per timed iteration, on the wall clock; None: no clock pairs
    gpu_use: dict[str, Any] | None = None      # GPU-busy time and the token's windows (cupti_tokens.summary)

    @property
    def truncated(self) -> bool:
        return not self.complete

    def resources_of(self, m: Measurement) -> tuple[KernelResources, ...]:
        """The resource rows of a Measurement's kernel and launch shape."""
        return tuple(r for r in self.resources if (r.kernel, r.grid, r.block) == (m.kernel, m.grid, m.block))

    def summary(self) -> str:
        """One line for a job log, e.g. 'complete: 60 of 74 launches in 20 timed iterations'."""
        how = "complete" if self.complete else (f"TRUNCATED by signal {self.signal}" if self.signal
                                                else "TRUNCATED (no end line: the program was killed or crashed)")
        extra = [f"{n} {what}" for n, what in ((self.unfinished, "unfinished launches"),
                 (self.partial_iterations, "iterations left out as unfinished"),
                 (self.unclosed_ranges, "unclosed iteration ranges"), (self.dropped, "dropped records")) if n]
        return (f"{how}: {self.counted} of {self.launches} launches in {self.iterations} timed iteration"
                f"{'s' if self.iterations != 1 else ''}" + (f" ({', '.join(extra)})" if extra else ""))


def parse(path: Path, iteration_range: str = "iteration") -> ParsedCapture:
    """Measurements per kernel x launch shape, and the capture's facts, from a sweep-cupti file.

    A truncated file (no `end` line, or a torn last line) still parses: what was
    flushed counts, and `complete` is False. Raises SweepError when nothing
    usable is there.
    """
    path = Path(path)
    cap = read_capture(path)
    kernels = cap.kernels
    finished = [k.end > k.start > 0 for k in kernels]
    if not any(finished):
        why = ("the program ran no kernels" if cap.complete else
               "the program stopped before CUPTI flushed any kernel record")
        raise SweepError(f"{path} holds no finished kernel launches: {why}; {RERUN}")
    ranges, unclosed = cap.ranges(iteration_range)
    partial = 0
    if not ranges:
        if unclosed:
            raise SweepError(f"{path}: none of the {unclosed} NVTX {iteration_range!r} ranges was closed, so the "
                             f"program stopped inside its first timed iteration; {RERUN}")
        timed = [(n, 0) for n, done in enumerate(finished) if done]
        iterations = 1
    else:
        calls = [cap.calls.get(k.correlation) for k in kernels]
        where, _ = attribute([(c.start, c.tid) if c else (None, None) for c in calls], ranges)
        # An iteration with a launch that never finished (still queued at a crash) is left
        # out whole: its other launches alone would fake a short iteration.
        cut = {i for i, done in zip(where, finished) if i is not None and not done}
        kept = {i: n for n, i in enumerate(sorted({i for i in where if i is not None} - cut))}
        timed = [(n, kept[i]) for n, i in enumerate(where) if i in kept]
        iterations, partial = len(kept), len(cut)
        if not timed:
            hint = ("no launch calls were traced (no `call` lines), so launches cannot be placed in ranges"
                    if not cap.calls else
                    "open the ranges on the thread that launches the kernels, around the launches")
            raise SweepError(f"{path}: none of the {len(kernels)} kernel launches was issued and finished inside one "
                             f"of the {len(ranges)} NVTX {iteration_range!r} ranges; {hint}")
    done = [n for n, ok in enumerate(finished) if ok]   # every timed launch finished (see above)
    on_stream = dict(zip(done, clip(_span(kernels[n]) for n in done)))
    launches = [_launch(kernels[n], on_stream[n], i) for n, i in timed]
    to_wall = cap.realtime()
    windows = None if to_wall is None else iteration_windows(
        ((i, kernels[n].start, kernels[n].end) for n, i in timed), to_wall)
    return ParsedCapture(
        measurements=tuple(aggregate(launches, iterations)), resources=_resources(kernels),
        complete=cap.complete, signal=cap.signal, iterations=iterations, launches=len(kernels),
        counted=len(launches), unfinished=finished.count(False), partial_iterations=partial,
        unclosed_ranges=unclosed, dropped=cap.dropped, pid=cap.pid, failures=cap.failures,
        timed_launches=tuple(launches), windows=windows, gpu_use=gpu_summary(cap))


def turn_launches(kernels: Sequence[KernelRecord]) -> list[Launch]:
    """The kernels of one turn (turn mode: the program's iteration alone on the GPU, every one
    finished), each timed on its stream as `parse` times it, as iteration 0."""
    return [_launch(k, c, 0) for k, c in zip(kernels, clip(_span(k) for k in kernels))]


def _span(k: KernelRecord) -> Span:
    return (k.device, k.context, k.stream), k.start, k.end


def _launch(k: KernelRecord, c: Clipped, iteration: int) -> Launch:
    return Launch(kernel=k.kernel, grid=k.grid, block=k.block, duration_ns=float(c.duration_ns),
                  iteration=iteration, kernel_full=k.kernel_full, overlap_ns=float(c.overlap_ns))


def _resources(kernels: list[KernelRecord]) -> tuple[KernelResources, ...]:
    counts: dict[tuple, int] = {}
    for k in kernels:
        key = (k.kernel, k.grid, k.block, k.kernel_full, k.mangled, k.registers, k.static_shared, k.dynamic_shared,
               k.local_per_thread)
        counts[key] = counts.get(key, 0) + 1
    return tuple(KernelResources(kernel, full, mangled, grid, block, regs, static, dynamic, local, n)
                 for (kernel, grid, block, full, mangled, regs, static, dynamic, local), n in sorted(counts.items()))
