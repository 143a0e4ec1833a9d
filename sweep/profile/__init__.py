"""Profile backends behind one schema.

A job's profile stage runs the target's timing program under one backend and
turns what it wrote into Measurements, one per kernel x launch shape:

    nsys    Nsight Systems: profile, export sqlite, group launches by kernel name
            AND grid/block (nsys' own cuda_gpu_kern_sum merges launch shapes, so
            it cannot tell two block sizes of one kernel apart); launches are
            attributed to timed iterations through the NVTX "iteration" ranges
            they were issued in, which also leaves warm-up launches out.
    ncu     Nsight Compute: gpu__time_duration.sum per launch, from the CSV.
    events  the engine's own CUDA-event timing (gpt2_forward --kernel-timing),
            no profiler needed.
    cupti   a CUPTI injection library in the program itself (cupti.py): launches attributed as nsys does;
            no profiler process, no capture range, no export (the default for custom targets).

Each backend module exposes BACKEND (a Backend: the command to run, and the
parser of what it wrote); BACKENDS maps their names to them, and is the only
list of backends (the space loader and the CLI read their names from it).

Capture windows. nsys and ncu capture between the program's cudaProfilerStart
and cudaProfilerStop; a program that never calls them gets no report from nsys
("No reports were generated") and no profiled kernel from ncu. The job cannot
tell beforehand (the call may sit in a static runtime, behind a flag, or in a
script's child), and a setting in the space file could be wrong in either
direction, so the run decides: an Invocation may carry a `fallback` (the same
profiler over the whole run), which the job runs when the first run exited 0
but `Backend.timed` finds it captured nothing. The job records which window it
used in the result's env["capture"]. The cost, one more run, falls only on
programs without the calls; cupti needs no window at all.

Every backend reports, per kernel x launch shape, the per-launch statistics and
the total per timed iteration: the run-to-run spread that selection weighs a
margin against.

Iteration windows. A backend that knows when the GPU ran each timed iteration
says so on the wall clock (Parsed.windows, CLOCK_REALTIME ns, the clock
sweep.node.clocks stamps its readings with), so the sampler can drop an iteration the
GPU ran throttled (sweep.node.sampling); it keeps the launches it aggregated
(Parsed.timed_launches), so a run without some iterations is aggregated again
from the rest (`Parsed.without`). cupti maps CUPTI's clock to the wall clock
through the pairs of readings of both its library records; nsys adds the
export's session start (its event times are relative to it). ncu replays each
kernel alone and the events backend reports no times of day: no windows.
"""

from __future__ import annotations

from sweep.core.errors import SweepError
from sweep.profile import cupti, events, ncu, nsys
from sweep.profile.base import (  # noqa: F401  (the backends' shared types, importable from here)
    Dim3, Window, Measurement, Launch, short_name, aggregate, iteration_windows, is_finite, Request, WHOLE_RUN,
    Invocation, Parsed, wrote_output, Backend, json_tail, forward_from_stdout, read_output,
)

def _registry() -> dict[str, Backend]:
    return {b.name: b for b in (nsys.BACKEND, ncu.BACKEND, events.BACKEND, cupti.BACKEND)}


BACKENDS: dict[str, Backend] = _registry()


def backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise SweepError(f"unknown profile backend {name!r}; choose one of {', '.join(BACKENDS)}") from None
