"""The profile backends' shared types: Measurement, Launch, Request, Invocation, Parsed,
Backend, and the helpers every backend parses with (sweep.profile says more)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

Dim3 = tuple[int, int, int]
Window = tuple[int, int]    # (start_ns, end_ns) on the wall clock (CLOCK_REALTIME ns, as time.time_ns())


@dataclass(frozen=True, slots=True)
class Measurement:
    """One kernel at one launch shape, over the timed iterations of one run (or several, pooled).

    Times are nanoseconds. `calls` is launches per iteration; `iter_total_ns`
    holds, per timed iteration, the summed time of this shape's launches in it.
    `runs` is empty for one run; for several runs pooled (sweep.node.sampling.pool) it
    holds each run's iteration count, so iter_total_ns splits back into the runs'
    samples (`per_run`). `workload` names the run it was measured in (a space's
    `workloads:`; "" for a space without them, and in files from before them).
    """

    kernel: str                 # function name as launched, without template arguments
    grid: Dim3
    block: Dim3
    calls: int
    median_ns: float            # per launch
    min_ns: float
    max_ns: float
    mean_ns: float
    std_ns: float
    iter_total_ns: tuple[float, ...] = field(default=())
    kernel_full: str = ""       # demangled name with template arguments, when known
    runs: tuple[int, ...] = ()  # iterations of each pooled run; () for one run
    workload: str = ""          # the workload it was measured in ("": the space's one run)

    @property
    def per_run(self) -> tuple[tuple[float, ...], ...]:
        """The per-iteration totals of each run (one run: all of them)."""
        if not self.runs:
            return (self.iter_total_ns,)
        out, i = [], 0
        for n in self.runs:
            out.append(self.iter_total_ns[i:i + n])
            i += n
        return tuple(out)

    @property
    def shape(self) -> str:
        """'kernel grid block', e.g. 'gelu_kernel 193x1x1 1024x1x1'."""
        return f"{self.kernel} {'x'.join(map(str, self.grid))} {'x'.join(map(str, self.block))}"

    @property
    def instances(self) -> int:
        """Launches measured in all (calls x iterations)."""
        return self.calls * max(1, len(self.iter_total_ns))

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def total_median_ns(self) -> float:
        """Median over iterations of this shape's time per iteration."""
        if self.iter_total_ns:
            return statistics.median(self.iter_total_ns)
        return self.median_ns * self.calls

    @property
    def total_std_ns(self) -> float:
        """Run-to-run spread (standard deviation over iterations) of the per-iteration total."""
        return statistics.stdev(self.iter_total_ns) if len(self.iter_total_ns) > 1 else 0.0

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel, "kernel_full": self.kernel_full, "grid": list(self.grid), "block": list(self.block),
            "calls": self.calls, "median_ns": self.median_ns, "min_ns": self.min_ns, "max_ns": self.max_ns,
            "mean_ns": self.mean_ns, "std_ns": self.std_ns, "iter_total_ns": list(self.iter_total_ns),
            "runs": list(self.runs),
            **({"workload": self.workload} if self.workload else {}),   # absent: result.json as before workloads
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Measurement":
        return cls(
            kernel=d["kernel"], grid=tuple(d["grid"]), block=tuple(d["block"]), calls=int(d["calls"]),
            median_ns=float(d["median_ns"]), min_ns=float(d["min_ns"]), max_ns=float(d["max_ns"]),
            mean_ns=float(d["mean_ns"]), std_ns=float(d["std_ns"]),
            iter_total_ns=tuple(float(x) for x in d.get("iter_total_ns", ())), kernel_full=d.get("kernel_full", ""),
            runs=tuple(int(n) for n in d.get("runs", ())), workload=str(d.get("workload", "")),
        )


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel launch as a profiler saw it: the parsers' common intermediate.

    nsys and cupti time it on its stream (sweep.profile.overlap): `duration_ns` is its GPU span
    less the part an earlier kernel on the same stream still ran in (programmatic dependent
    launch), and `overlap_ns` that part; 0 without overlap, so duration_ns is then the span."""

    kernel: str
    grid: Dim3
    block: Dim3
    duration_ns: float
    iteration: int              # index of the timed iteration it belongs to (0-based)
    kernel_full: str = ""
    overlap_ns: float = 0.0     # GPU time spent while the kernel before it on its stream still ran, not counted


def short_name(full: str) -> str:
    """`void residual_kernel<128, 1>(float *, ...)` -> `residual_kernel`.

    Strips the return type, the parameter list and template arguments, and any
    namespace; keeps operator names and lambdas intact enough to stay distinct.
    """
    s = full.strip()
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):  # the parameter list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    s = s[:cut]
    depth, out = 0, []
    for ch in s:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    s = s.split()[-1] if s.split() else s  # drop a return type such as "void"
    return s.split("::")[-1] or full


def aggregate(launches: Iterable[Launch], iterations: int) -> list[Measurement]:
    """Group launches by (kernel, grid, block) into Measurements.

    `iterations` is how many timed iterations the run had; a shape launched in
    some iterations and not others gets 0 for the iterations it missed, so its
    per-iteration totals stay comparable across shapes.
    """
    groups: dict[tuple[str, Dim3, Dim3], list[Launch]] = {}
    for launch in launches:
        groups.setdefault((launch.kernel, launch.grid, launch.block), []).append(launch)
    out = []
    for (kernel, grid, block), ls in sorted(groups.items()):
        durs = [l.duration_ns for l in ls]
        totals = [0.0] * iterations
        for l in ls:
            totals[l.iteration] += l.duration_ns
        out.append(Measurement(
            kernel=kernel, grid=grid, block=block, calls=max(1, round(len(ls) / max(1, iterations))),
            median_ns=statistics.median(durs), min_ns=min(durs), max_ns=max(durs), mean_ns=statistics.fmean(durs),
            std_ns=statistics.stdev(durs) if len(durs) > 1 else 0.0, iter_total_ns=tuple(totals),
            kernel_full=ls[0].kernel_full,
        ))
    return out


def iteration_windows(spans: Iterable[tuple[int, int, int]], to_wall: Callable[[int], int]) -> tuple[Window, ...]:
    """Per timed iteration, from its first kernel's GPU start to its last kernel's GPU end, on the
    wall clock: when the GPU ran what the iteration's sample times. `spans`: (iteration, start,
    end) of each counted launch in the profiler's clock; `to_wall` maps that clock to the wall
    clock. Iterations are numbered from 0 and each holds a launch (sweep.profile.ranges)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, start, end in spans:
        first[i] = min(first.get(i, start), start)
        last[i] = max(last.get(i, end), end)
    return tuple((to_wall(first[i]), to_wall(last[i])) for i in sorted(first))


def is_finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


# ---------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """What a backend is given to profile one run of the target's timing program."""

    job_dir: Path
    program: Callable[..., list[str]]          # program(extra=(), iterations=None) -> the command line
    tool: str = ""                             # the profiler's executable, for backends that need one
    options: Mapping[str, Any] = field(default_factory=dict)   # the space's profile: section
    events_args: tuple[str, ...] = ()          # the target's arguments for its own event timing
    cache_dir: Path | None = None              # where a backend keeps what it builds once (cupti: its library)
    gpu_token: Path | None = None              # overlap mode: the GPU's lock file the program takes (cupti only)


WHOLE_RUN = "whole run"                        # Invocation.capture of a run captured from start to exit


@dataclass(frozen=True, slots=True)
class Invocation:
    """The profiled run: its command, what it writes, and what runs after it off the GPU."""

    command: list[str]
    output: Path
    env: Mapping[str, str] = field(default_factory=dict)   # added to the program's environment
    iterations: int | None = None
    post: tuple[tuple[str, ...], ...] = ()     # commands run after the GPU is released (e.g. nsys export)
    capture: str = WHOLE_RUN                   # the window captured: "cudaProfilerApi", "whole run", ...
    fallback: "Invocation | None" = None       # run instead when this one exited 0 having captured nothing


@dataclass(frozen=True, slots=True)
class Parsed:
    """What a backend read from one run. `timed_launches`: the launches `measurements` aggregate,
    each with its timed iteration (() where the backend does not keep them); `windows`: per timed
    iteration, when the GPU ran it on the wall clock (None where the backend cannot say; see
    "Iteration windows" above)."""

    measurements: list[Measurement]
    forward_ms: dict[str, float] = field(default_factory=dict)
    device_text: str = ""                      # text that may hold the program's device facts (its JSON)
    env: Mapping[str, Any] = field(default_factory=dict)   # facts for the result's env (cupti: the capture's summary)
    timed_launches: tuple[Launch, ...] = ()
    windows: tuple[Window, ...] | None = None

    def without(self, dropped: Collection[int]) -> "Parsed":
        """This run without the timed iterations `dropped` (0-based): their launches left out, the
        others' iterations renumbered and aggregated again, so every statistic (per launch and per
        iteration) is over the iterations kept. Needs the windows and the launches."""
        if not dropped:
            return self
        if self.windows is None or not self.timed_launches:
            raise ValueError("only a run with its iteration windows and launches can drop iterations")
        kept = [i for i in range(len(self.windows)) if i not in dropped]
        renumber = {old: new for new, old in enumerate(kept)}
        launches = tuple(replace(launch, iteration=renumber[launch.iteration]) for launch in self.timed_launches
                         if launch.iteration in renumber)
        return replace(self, measurements=aggregate(launches, len(kept)), timed_launches=launches,
                       windows=tuple(self.windows[i] for i in kept))


def wrote_output(inv: Invocation) -> bool:
    """The default `Backend.timed`: the run wrote its output file."""
    return inv.output.is_file()


@dataclass(frozen=True, slots=True)
class Backend:
    """A profile backend: `invocation` makes the command, `parse` reads what it wrote
    (raising SweepError when the output is missing or malformed).

    `timed(inv)` says whether a finished run reached the part the backend
    captures (nsys: a report was written; ncu: a launch was profiled; cupti: a
    timed NVTX range opened): a run that exited 0 without it falls back to the
    Invocation's `fallback`, and a self-checking program (`verify: profile`)
    that exited non-zero without it failed its check. `setup(req)` does what
    needs no GPU before the job takes it (cupti: build its library once), may
    raise SweepError, and runs in the build stage too, off the GPU.
    """

    name: str
    doc: str
    invocation: Callable[[Request], Invocation]
    parse: Callable[[Invocation, str], Parsed]
    tool: str | None = None                    # executable it needs ($NAME or PATH), None for none
    timed: Callable[[Invocation], bool] = wrote_output
    setup: Callable[[Request], None] | None = None


def json_tail(text: str) -> dict[str, Any]:
    """The engine-style JSON object (`{"schema": ...}`) in a program's output; a profiler
    may print lines around it. {} when there is none."""
    import json
    import re

    for m in re.finditer(r'\{\s*"schema"', text):
        try:
            obj, _ = json.JSONDecoder().raw_decode(text, m.start())
            return obj if isinstance(obj, dict) else {}
        except ValueError:
            continue
    return {}


def forward_from_stdout(stdout: str) -> dict[str, float]:
    fwd = json_tail(stdout).get("forward_ms", {})
    return fwd if isinstance(fwd, dict) else {}


def read_output(inv: Invocation) -> str:
    """The text a profiled run wrote to its output file; a clear error when it wrote none."""
    try:
        return inv.output.read_text(errors="replace")
    except OSError:
        from sweep.core.errors import SweepError

        raise SweepError(f"the profile run wrote no {inv.output.name}") from None
