"""A sweep's results in the T4 results format (`config-sweep report SWEEP --format t4`).

T4 is the auto-tuning community's results format (schema_version 1.0.0; its JSON schema
ships with Kernel Tuner as kernel_tuner/schema/T4/1.0.0/results-schema.json, a copy under
tests/data/t4/). One entry per configuration the sweep planned and ended (role sweep):

    configuration   {parameter: value}: the recorded names where the space maps its macros to
                    a recording's (`replay: {params}`, a T1 space's own names), else the macros
    times           milliseconds, as Kernel Tuner writes them: compilation (the build),
                    runtimes (the per-iteration samples of the swept kernels, summed over
                    kernels), validation (verify), framework (the rest of the job's time),
                    search_algorithm 0 (not recorded per configuration)
    invalidity      correct | compile | runtime | timeout | correctness | constraints
    measurements    [{name: time, value: per-iteration time of the swept kernels in ms (the
                    sum of their medians), or the failure's Kernel Tuner error string}]
    objectives      ["time"]

Configurations that have not ended (pending, running, preempted, cancelled) are left out:
T4 has no word for them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from sweep.core import atomic
from sweep.report import loading
from sweep.report.tables import macro_columns

SCHEMA_VERSION = "1.0.0"
FILE = "results_T4.json"
INVALIDITY = {"ok": "correct", "compile_failed": "compile", "runtime_failed": "runtime", "timeout": "timeout",
              "verify_failed": "correctness", "skipped": "constraints"}
ERROR = {"compile": "CompilationFailedConfig", "runtime": "RuntimeFailedConfig", "timeout": "RuntimeFailedConfig",
         "correctness": "InvalidConfig", "constraints": "InvalidConfig"}


def _ms(seconds: Any) -> float:
    return float(seconds) * 1e3 if isinstance(seconds, (int, float)) and math.isfinite(seconds) else 0.0


def _int(v: Any) -> Any:
    return int(v) if isinstance(v, float) and math.isfinite(v) and v.is_integer() else v


def t4_results(results_dir: Path) -> dict[str, Any]:
    """results/<sweep>/ as a T4 results document."""
    sw = loading.load(Path(results_dir))
    configs, meas = sw.configs, sw.measurements
    macros = [p.macro for p in sw.space.parameters] if sw.space is not None else macro_columns(configs)
    name_of = sw.space.replay.name_of if sw.space is not None else (lambda m: m)
    kernels = _swept_kernels(sw)
    by_tag = {t: g for t, g in meas.groupby("tag")} if not meas.empty else {}
    out = []
    for row in configs.to_dict("records") if not configs.empty else ():
        invalidity = INVALIDITY.get(str(row.get("status")))
        if row.get("role", "sweep") != "sweep" or invalidity is None:
            continue
        rows = by_tag.get(row["tag"], pd.DataFrame())
        if kernels is not None and not rows.empty:
            rows = rows[rows["kernel"].isin(kernels)]
        build, verify, profile = _ms(row.get("build_s")), _ms(row.get("verify_s")), _ms(row.get("profile_s"))
        total = _ms(row.get("total_s"))
        times = {"compilation": build, "framework": max(0.0, total - build - verify - profile),
                 "search_algorithm": 0.0, "validation": verify}
        if invalidity == "correct" and not rows.empty:
            times["runtimes"] = _runtimes_ms(rows)
            value: Any = float(rows["total_median_ns"].sum()) / 1e6
        else:
            value = ERROR.get(invalidity, "RuntimeFailedConfig") if invalidity != "correct" else "RuntimeFailedConfig"
        out.append({
            "timestamp": str(row.get("finished_at") or ""),
            "configuration": {name_of(m): _int(row.get(m)) for m in macros if m in row},
            "times": times, "invalidity": invalidity, "correctness": 1 if invalidity == "correct" else 0,
            "measurements": [{"name": "time", "value": value, "unit": "ms"}], "objectives": ["time"],
        })
    gpus = sorted({str(g) for g in configs.get("gpu", pd.Series(dtype=object)).dropna() if str(g)})
    return {"schema_version": SCHEMA_VERSION,
            "metadata": {"timeunit": "milliseconds", "sweep": sw.name, "gpu": ", ".join(gpus)},
            "results": out}


def _swept_kernels(sw: loading.SweepData) -> set[str] | None:
    """The kernels the space's parameters govern (None: every kernel measured, without the space)."""
    if sw.space is None or sw.measurements.empty:
        return None
    names = set(sw.measurements["kernel"])
    return {k for k in names if any(p.governs(k) for p in sw.space.parameters)} or None


def _runtimes_ms(rows: pd.DataFrame) -> list[float]:
    """Per-iteration samples of the swept kernels summed over kernels, in ms ([] when not recorded alike)."""
    if "iter_total_ns" not in rows:
        return []
    series = [list(s) if s is not None else [] for s in rows["iter_total_ns"]]
    if not series or not series[0] or any(len(s) != len(series[0]) for s in series):
        return []
    return [sum(vals) / 1e6 for vals in zip(*series)]


def write_t4(results_dir: Path) -> Path:
    """results/<sweep>/results_T4.json (atomically); its path."""
    path = Path(results_dir) / FILE
    atomic.write_text(path, json.dumps(t4_results(results_dir), indent=1) + "\n")
    return path
