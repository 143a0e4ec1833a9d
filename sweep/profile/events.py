"""Events backend: the engine's own CUDA-event timing, no profiler needed.

`gpt2_forward --kernel-timing --json FILE` writes schema "engine-timing/1":

    {"schema": "engine-timing/1", "program": ..., "device": {...}, "model": {...},
     "run": {"iterations": N, "warmup": W, ...},
     "forward_ms": {"median_ms", "min_ms", "max_ms", "mean_ms", "std_ms"},
     "kernels": [{"kernel", "grid": [x, y, z], "block": [x, y, z], "calls",
                  "median_ns", "min_ns", "max_ns", "mean_ns", "std_ns",
                  "iter_total_ns": [one per iteration]}, ...]}

Pitfalls:
* The times are event-to-event around each launch, recorded in extra
  iterations after the profiled ones. An event pair also measures any wait
  for the CPU to submit the kernel, so short kernels on an otherwise idle GPU
  (the first launches of a forward pass) read several times longer than
  nsys or ncu report for the same launch. Compare shapes within this backend.
* `kernel` is the name the engine passes to its launch wrapper (a short
  name); there is no full name, so kernel_full is "".
* The engine writes one iter_total_ns entry per iteration a shape was
  launched in; a shape missing from some iterations has fewer entries, and
  zeros are appended for the missing ones (order does not affect the spread).
"""

from __future__ import annotations

import json
from typing import Any

from sweep.core.errors import SweepError
from sweep.profile.base import Backend, Dim3, Invocation, Measurement, Parsed, Request, read_output

SCHEMA = "engine-timing/1"
STATS = ("median_ns", "min_ns", "max_ns", "mean_ns", "std_ns")


def parse_json(text: str, *, source: str = "engine timing JSON") -> list[Measurement]:
    """Measurements per kernel x launch shape from gpt2_forward's engine-timing/1 JSON."""
    doc = _load(text, source)
    kernels = doc.get("kernels")
    if not isinstance(kernels, list):
        raise SweepError(f"{source} has no \"kernels\" list; run gpt2_forward with --kernel-timing")
    iterations = _iterations(doc, source)
    out = [_measurement(k, i, iterations, source) for i, k in enumerate(kernels)]
    return sorted(out, key=lambda m: (m.kernel, m.grid, m.block))


def forward_ms(text: str, *, source: str = "engine timing JSON") -> dict[str, float]:
    """The whole forward pass's time per iteration: median_ms, min_ms, max_ms, mean_ms, std_ms."""
    block = _load(text, source).get("forward_ms")
    if not isinstance(block, dict):
        raise SweepError(f"{source} has no \"forward_ms\" object; write it with gpt2_forward --json")
    try:
        return {k: float(v) for k, v in block.items()}
    except (TypeError, ValueError):
        raise SweepError(f"{source}: forward_ms holds a value that is not a number ({block}); "
                         f"write it again with gpt2_forward --json") from None


def _load(text: str, source: str) -> dict[str, Any]:
    def not_finite(constant: str) -> float:
        # json.loads takes NaN and Infinity; a time that is not a number fails the parse here,
        # where it names the file, not later in result.json's writer (allow_nan=False)
        raise SweepError(f"{source} holds {constant}, not a finite number: the program's timing failed; "
                         f"re-run it and check its log")

    try:
        doc = json.loads(text, parse_constant=not_finite)
    except json.JSONDecodeError as e:
        raise SweepError(f"{source} is not valid JSON ({e}); the program probably stopped while writing it: "
                         f"re-run it and check its log") from None
    if not isinstance(doc, dict):
        raise SweepError(f"{source} is a JSON {type(doc).__name__}, not an object; pass gpt2_forward's --json file")
    if doc.get("schema") != SCHEMA:
        raise SweepError(f"{source} has schema {doc.get('schema')!r}, this code reads {SCHEMA!r}; "
                         f"re-run the profile with the engine built from this checkout")
    return doc


def _iterations(doc: dict[str, Any], source: str) -> int | None:
    run = doc.get("run")
    n = run.get("iterations") if isinstance(run, dict) else None
    if n is not None and (not isinstance(n, int) or n < 1):
        raise SweepError(f"{source}: run.iterations is {n!r}, expected a positive integer; "
                         f"write it again with gpt2_forward --json")
    return n


def _measurement(k: Any, index: int, iterations: int | None, source: str) -> Measurement:
    where = f"{source}: kernels[{index}]"
    if not isinstance(k, dict):
        raise SweepError(f"{where} is not an object; write it again with gpt2_forward --json")
    missing = [f for f in ("kernel", "grid", "block", "calls", *STATS, "iter_total_ns") if f not in k]
    if missing:
        raise SweepError(f"{where} lacks {', '.join(missing)}; write it again with gpt2_forward --json")
    try:
        stats = {f: float(k[f]) for f in STATS}
        totals = [float(x) for x in k["iter_total_ns"]]
        calls = int(k["calls"])
    except (TypeError, ValueError):
        raise SweepError(f"{where} holds a value that is not a number; write it again with gpt2_forward --json") \
            from None
    if iterations is not None:
        if len(totals) > iterations:
            raise SweepError(f"{where} has {len(totals)} iter_total_ns entries for {iterations} iterations; "
                             f"write it again with gpt2_forward --json")
        totals += [0.0] * (iterations - len(totals))
    return Measurement(kernel=str(k["kernel"]), grid=_dim3(k["grid"], where, "grid"),
                       block=_dim3(k["block"], where, "block"), calls=calls, iter_total_ns=tuple(totals), **stats)


def _dim3(value: Any, where: str, field: str) -> Dim3:
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) for v in value)):
        raise SweepError(f"{where}.{field} is {value!r}, expected three integers; "
                         f"write it again with gpt2_forward --json")
    return value[0], value[1], value[2]


def _invocation(req: Request) -> Invocation:
    if not req.events_args:
        raise SweepError("the target has no events timing (target.events); use the nsys, ncu or cupti backend")
    out = req.job_dir / "events.json"
    return Invocation(req.program(extra=req.events_args), out, capture="the program's own events")


def _parse(inv: Invocation, stdout: str) -> Parsed:
    # No iteration windows: the JSON times each launch with CUDA events but says nothing of when
    # on the wall clock, so a run is judged for throttling by its peak clock only (sweep.node.sampling).
    text = read_output(inv)
    source = str(inv.output)
    return Parsed(parse_json(text, source=source), forward_ms(text, source=source), text)


BACKEND = Backend("events", "the program's own CUDA events around every launch (engine-timing/1 JSON); no profiler",
                  _invocation, _parse)
