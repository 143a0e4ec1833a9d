"""Recordings a replay answers from: what each configuration measured, read from a file.

    Kernel Tuner cache (.json, .json.gz)   {"kernel_name", "device_name", "tune_params_keys",
                                           "cache": {key: {params..., "time" (ms) | error string,
                                           "times" [ms], compile_time, benchmark_time,
                                           framework_time, verification_time (ms)}}}
    T4 results (.json, .json.gz)           {"schema_version", "results": [{"configuration",
                                           "times": {compilation, runtimes [ms], framework,
                                           validation, search_algorithm}, "invalidity",
                                           "measurements": [{"name": "time", "value"}]}]}
    a sweep's results                      results/<name>/ (configs.parquet, measurements.parquet),
                                           or its jobs folder (jobs/<name>/*/result.json)

Each becomes a Recording: per configuration (its recorded parameter values) a
Recorded entry with its status, reason, Measurements and what it cost the GPU
(`costs`, seconds: compile, runs, verify, framework). A failed configuration keeps
its kind (Kernel Tuner's CompilationFailedConfig / RuntimeFailedConfig /
InvalidConfig, T4's invalidity) and nothing is invented for one the file lacks.
The strategy's own time in these files (Kernel Tuner's strategy_time, T4's
search_algorithm) is not counted: it is the recording tuner's, not the GPU's.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from sweep.core.errors import SweepError
from sweep.profile import Measurement
from sweep.records import JobConfig, Status, read_result

MAX_BYTES = 1 << 30            # a recording unpacked; the shipped ones are ~40 MiB
KT_ERRORS = {"CompilationFailedConfig": Status.COMPILE_FAILED, "RuntimeFailedConfig": Status.RUNTIME_FAILED,
             "InvalidConfig": Status.SKIPPED}
T4_INVALIDITY = {"correct": Status.OK, "compile": Status.COMPILE_FAILED, "runtime": Status.RUNTIME_FAILED,
                 "timeout": Status.TIMEOUT, "correctness": Status.VERIFY_FAILED, "constraints": Status.SKIPPED}
KT_KEYS = {"time", "times", "compile_time", "benchmark_time", "framework_time", "verification_time", "strategy_time",
           "timestamp", "GFLOP/s"}
MS = 1e-3
NOT_RECORDED = "not in the recording"   # a replay's reason for a configuration its recording lacks
T4_KERNEL = "kernel"


class RecordingError(SweepError):
    """A recording that cannot be read or matched: what is wrong with the file at `path`. Its message
    names the command-line option that gave the file (`--from`); a caller that got the file from
    another option says so with `named`."""

    def __init__(self, path: Path | str, problem: str, option: str = "--from"):
        super().__init__(f"{option} {path}: {problem}")
        self.path, self.problem = path, problem

    def named(self, option: str) -> "RecordingError":
        """The same error, the file named as given by `option` (start_from, say)."""
        return RecordingError(self.path, self.problem, option)


@dataclass(frozen=True, slots=True)
class Recorded:
    """One configuration as the recording has it."""

    params: dict[str, Any]
    status: Status
    reason: str = ""
    measurements: tuple[Measurement, ...] = ()
    costs: dict[str, float] = field(default_factory=dict)   # seconds: compile, runs, verify, framework

    @property
    def cost_s(self) -> float:
        """What the configuration cost the GPU it was recorded on, in seconds."""
        return sum(self.costs.values())


@dataclass(frozen=True, slots=True)
class Recording:
    path: Path
    kind: str                               # kernel_tuner | t4 | sweep
    device: str
    params: tuple[str, ...]                 # the recorded parameter names
    entries: tuple[Recorded, ...]
    kernel: str = ""                        # the kernel the times are of, where the file names it (not T4)
    objective: str = "time"                 # what the recording tuner optimized (a Kernel Tuner cache declares it)

    def values_of(self, name: str) -> set[Any]:
        return {key(e.params.get(name)) for e in self.entries}


def key(v: Any) -> Any:
    """A recorded value as configurations are matched on it: 16.0 and 16 are one value."""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    return v


def load(path: Path) -> Recording:
    """The recording at `path` (a file or a sweep's folder); SweepError in one line naming what is wrong."""
    path = Path(path)
    if path.is_dir():
        return _sweep(path)
    data = _json(path)
    if isinstance(data, dict) and isinstance(data.get("cache"), dict):
        return _kernel_tuner(path, data)
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        return _t4(path, data)
    raise RecordingError(path, "neither a Kernel Tuner cache (a 'cache' mapping) nor T4 results (a 'results' "
                               "list); give one of those, or a sweep's results/<name>/ or jobs/<name>/ folder")


def _json(path: Path) -> Any:
    try:
        with path.open("rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except (OSError, EOFError) as e:
        raise RecordingError(path, f"cannot read it ({getattr(e, 'strerror', None) or e}); give a Kernel Tuner "
                                   "cache or T4 results file (.json or .json.gz), or a sweep's results "
                                   "folder") from None
    if len(raw) > MAX_BYTES:
        raise RecordingError(path, f"over {MAX_BYTES >> 20} MiB unpacked; replay a smaller recording")
    try:
        return json.loads(raw)
    except ValueError as e:
        raise RecordingError(path, f"not valid JSON ({e}); give a Kernel Tuner cache or T4 results file") from None


def _ms_samples(times: Any) -> tuple[float, ...]:
    if not isinstance(times, list):
        return ()
    return tuple(float(t) * 1e6 for t in times if isinstance(t, (int, float)) and math.isfinite(t))


def _measurement(kernel: str, params: Mapping[str, Any], time_ms: float, samples_ns: tuple[float, ...]) -> Measurement:
    """A recorded time as a Measurement of `kernel`: one launch an iteration, each sample an iteration;
    the block from block_size_x/y/z where recorded, the grid unknown (0x0x0)."""
    per_iter = float(time_ms) * 1e6
    samples = samples_ns or (per_iter,)
    block = tuple(int(key(params.get(f"block_size_{a}", 1))) if isinstance(key(params.get(f"block_size_{a}", 1)), int)
                  else 1 for a in "xyz")
    return Measurement(kernel=kernel, grid=(0, 0, 0), block=block, calls=1, median_ns=statistics.median(samples),
                       min_ns=min(samples), max_ns=max(samples), mean_ns=per_iter,
                       std_ns=statistics.stdev(samples) if len(samples) > 1 else 0.0, iter_total_ns=samples_ns)


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else 0.0


def _kernel_tuner(path: Path, data: dict) -> Recording:
    kernel = str(data.get("kernel_name") or "kernel")
    names = data.get("tune_params_keys") or list(data.get("tune_params") or {})
    out = []
    for k, e in data["cache"].items():
        if not isinstance(e, dict):
            raise RecordingError(path, f"cache entry {k!r} is not a mapping; is it a Kernel Tuner cache file?")
        params = {n: e.get(n) for n in names} if names else {n: v for n, v in e.items() if n not in KT_KEYS}
        costs = {"compile": _number(e.get("compile_time")) * MS, "runs": _number(e.get("benchmark_time")) * MS,
                 "verify": _number(e.get("verification_time")) * MS, "framework": _number(e.get("framework_time")) * MS}
        t = e.get("time")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
            out.append(Recorded(params, Status.OK, "", (_measurement(kernel, params, t, _ms_samples(e.get("times"))),),
                                costs))
        else:
            status = KT_ERRORS.get(str(t), Status.RUNTIME_FAILED)
            out.append(Recorded(params, status, f"recorded as {t} in {path.name}", (), costs))
    return Recording(path, "kernel_tuner", str(data.get("device_name") or ""), tuple(names or _union(out)), tuple(out),
                     kernel, str(data.get("objective") or "time"))


def _t4(path: Path, data: dict) -> Recording:
    kernel = T4_KERNEL    # T4 names no kernel: the replay names it after the space's (sweep.dispatch.replay)
    out = []
    for i, r in enumerate(data["results"]):
        if not isinstance(r, dict) or not isinstance(r.get("configuration"), dict):
            raise RecordingError(path, f"results[{i}] has no 'configuration' mapping; is it a T4 results file?")
        params, times = r["configuration"], r.get("times") if isinstance(r.get("times"), dict) else {}
        runtimes = times.get("runtimes") if isinstance(times.get("runtimes"), list) else []
        costs = {"compile": _number(times.get("compilation", times.get("compilation_time"))) * MS,
                 "runs": sum(_number(t) for t in runtimes) * MS, "verify": _number(times.get("validation")) * MS,
                 "framework": _number(times.get("framework")) * MS}
        status = T4_INVALIDITY.get(str(r.get("invalidity")))
        if status is None:
            raise RecordingError(path, f"results[{i}].invalidity {r.get('invalidity')!r} is not one of "
                                       f"{', '.join(T4_INVALIDITY)} (the T4 schema's)")
        value = next((m.get("value") for m in r.get("measurements") or () if isinstance(m, dict)
                      and m.get("name") == "time"), None)
        if status == Status.OK and isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(Recorded(params, status, "", (_measurement(kernel, params, value, _ms_samples(runtimes)),),
                                costs))
        elif status == Status.OK:
            out.append(Recorded(params, Status.RUNTIME_FAILED, f"recorded as correct in {path.name} but with no "
                                "time measurement", (), costs))
        else:
            out.append(Recorded(params, status, f"recorded as invalid ({r.get('invalidity')}) in {path.name}", (),
                                costs))
    return Recording(path, "t4", "", tuple(_union(out)), tuple(out), "")


def _union(entries: Iterable[Recorded]) -> list[str]:
    names: dict[str, None] = {}
    for e in entries:
        names.update(dict.fromkeys(e.params))
    return list(names)


def _sweep(path: Path) -> Recording:
    """A previous sweep: its collected tables (results/<name>/), else its jobs' result.json files."""
    if (path / "configs.parquet").is_file():
        return _tables(path)
    dirs = sorted(d for d in path.iterdir() if d.is_dir() and (d / "config.json").is_file())
    if not dirs:
        raise RecordingError(path, "a folder with neither configs.parquet (a sweep's results/<name>/) nor job "
                                   "folders with config.json (its jobs/<name>/); give one of those")
    out, gpus = [], []
    for d in dirs:
        cfg, r = JobConfig.load(d), read_result(d)
        if r is None or r.config_hash != cfg.config_hash or not cfg.macros or r.status not in _FINAL \
                or r.reason.startswith(NOT_RECORDED):
            continue          # not measured, the baseline (no macros), or a replay's gap: not a recording
        out.append(Recorded(dict(cfg.macros), r.status, r.reason, r.measurements, _job_costs(r.timings)))
        gpus.append(r.env.get("gpu"))
    return Recording(path, "sweep", _device(gpus), tuple(_union(out)), tuple(out))


_FINAL = frozenset(Status) - {Status.PENDING, Status.RUNNING, Status.PREEMPTED, Status.CANCELLED}


def _job_costs(timings: Mapping[str, Any]) -> dict[str, float]:
    """A measured job's GPU-side time: its build, verify and profile stages (parse runs on the CPU)."""
    return {"compile": _number(timings.get("build")), "verify": _number(timings.get("verify")),
            "runs": _number(timings.get("profile"))}


def _device(gpus: Iterable[Any]) -> str:
    return next((str(g) for g in gpus if isinstance(g, str) and g), "")


def _tables(path: Path) -> Recording:
    import pandas as pd

    try:
        configs = pd.read_parquet(path / "configs.parquet")
        meas = pd.read_parquet(path / "measurements.parquet")
    except (OSError, ValueError) as e:
        raise RecordingError(path, f"cannot read its tables ({e}); collect the sweep again") from None
    cols = list(configs.columns)
    if "role" not in cols or "status" not in cols or cols.index("status") <= cols.index("role"):
        raise RecordingError(path, "configs.parquet lacks the role and status columns a sweep's tables have")
    names = cols[cols.index("role") + 1:cols.index("status")]     # collect writes tag, role, the macros, status
    by_tag: dict[str, list[Measurement]] = {}
    for row in meas.to_dict("records"):
        samples = row.get("iter_total_ns")
        by_tag.setdefault(row["tag"], []).append(Measurement(
            kernel=row["kernel"], grid=_dim3(row["grid"]), block=_dim3(row["block"]), calls=int(row["calls"]),
            median_ns=float(row["median_ns"]), min_ns=float(row["min_ns"]), max_ns=float(row["max_ns"]),
            mean_ns=float(row["mean_ns"]), std_ns=float(row["std_ns"]),
            iter_total_ns=tuple(float(x) for x in samples) if samples is not None else (),
            kernel_full=str(row.get("kernel_full") or ""), workload=str(row.get("workload") or "")))
    out, seen = [], set()
    for row in configs.to_dict("records"):
        values = {n: key(row[n]) for n in names}
        if any(not isinstance(v, int) for v in values.values()) or row.get("status") not in {s.value for s in _FINAL} \
                or str(row.get("reason") or "").startswith(NOT_RECORDED):
            continue                      # the baseline (no macros), not measured, or a replay's gap
        k = tuple(values.items())
        if k in seen:                     # the best job repeats a sweep job's configuration: the first counts
            continue
        seen.add(k)
        timings = {"build": row.get("build_s"), "verify": row.get("verify_s"), "profile": row.get("profile_s")}
        out.append(Recorded(values, Status(row["status"]), str(row.get("reason") or ""),
                            tuple(by_tag.get(row["tag"], ())), _job_costs(timings)))
    device = _device(configs["gpu"]) if "gpu" in configs else ""
    return Recording(path, "sweep", device, tuple(names), tuple(out))


def _dim3(text: Any) -> tuple[int, int, int]:
    parts = [int(x) for x in str(text).split("x")] + [1, 1, 1]
    return parts[0], parts[1], parts[2]
