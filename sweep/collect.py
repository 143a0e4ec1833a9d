"""Collect a sweep's result files into tables (pandas).

    configs       one row per job: tag, role, status, stage, reason, log, the macros,
                  GPU, driver, CUDA, commit, host, timings, forward time
    measurements  one row per job x kernel x launch shape (long format): the macros,
                  kernel, grid, block, calls, instances, per-launch median/min/max/
                  mean/std ns, per-iteration total (median and std over iterations)

Both are written to results/<sweep>/ as parquet and csv (atomically), and are
what selection and the report read. Jobs the sweep planned but that have no
result yet appear in `configs` with status "pending" (or "running").
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sweep import atomic
from sweep.errors import SweepError
from sweep.job import read_result

MANIFEST = "sweep.json"


@dataclass(frozen=True, slots=True)
class Collected:
    configs: pd.DataFrame
    measurements: pd.DataFrame
    manifest: dict


def job_dirs(sweep_dir: Path) -> list[Path]:
    """Job folders of a sweep (folders holding config.json; those starting with '_' are the driver's)."""
    return sorted(d for d in Path(sweep_dir).iterdir() if d.is_dir() and not d.name.startswith("_")
                  and (d / "config.json").is_file())


def read_manifest(sweep_dir: Path) -> dict:
    path = Path(sweep_dir) / MANIFEST
    try:
        return json.loads(path.read_text())
    except OSError:
        raise SweepError(f"{sweep_dir} is not a sweep (no {MANIFEST}); run `python config_sweep.py run SPACE.yaml` first") from None
    except ValueError as e:
        raise SweepError(f"{path} is damaged ({e}); run the sweep again to rewrite it") from None


def collect(sweep_dir: Path) -> Collected:
    sweep_dir = Path(sweep_dir)
    manifest = read_manifest(sweep_dir)
    config_rows, meas_rows = [], []
    seen = set()
    for d in job_dirs(sweep_dir):
        cfg = json.loads((d / "config.json").read_text())
        seen.add(d.name)
        r = read_result(d)
        running = (d / "state.json").is_file()
        base = {"tag": d.name, "role": cfg.get("role", "sweep"), **{k: v for k, v in cfg["macros"].items()}}
        if r is None or r.config_hash != cfg["config_hash"]:
            config_rows.append({**base, "status": "running" if running else "pending", "stage": "", "reason": "",
                                "log": "", "config_hash": cfg["config_hash"]})
            continue
        env = r.env
        row = {
            **base, "status": r.status, "stage": r.stage, "reason": r.reason, "log": r.log, "config_hash": r.config_hash,
            "attempt": r.attempt, "gpu": env.get("gpu", ""), "driver": env.get("driver", ""),
            "cuda_runtime": env.get("cuda_runtime"), "commit": env.get("commit", ""), "host": env.get("host", ""),
            "backend": env.get("backend", ""), "forward_ms": r.forward_ms.get("median_ms"),
            "build_s": r.timings.get("build"), "verify_s": r.timings.get("verify"), "profile_s": r.timings.get("profile"),
            "parse_s": r.timings.get("parse"), "total_s": r.timings.get("total"),
            "objects_compiled": len(r.build.get("compiled", [])), "objects_cached": len(r.build.get("cached", [])),
            "finished_at": r.finished_at,
        }
        config_rows.append(row)
        for m in r.measurements:
            meas_rows.append({
                **base, "status": r.status, "kernel": m.kernel, "kernel_full": m.kernel_full,
                "grid": "x".join(map(str, m.grid)), "block": "x".join(map(str, m.block)),
                "threads_per_block": m.threads_per_block, "calls": m.calls, "instances": m.instances,
                "iterations": len(m.iter_total_ns), "median_ns": m.median_ns, "min_ns": m.min_ns, "max_ns": m.max_ns,
                "mean_ns": m.mean_ns, "std_ns": m.std_ns, "total_median_ns": m.total_median_ns,
                "total_std_ns": m.total_std_ns, "gpu": row["gpu"], "driver": row["driver"],
                "cuda_runtime": row["cuda_runtime"], "commit": row["commit"], "backend": row["backend"],
            })
    for t in manifest.get("tags", []):  # planned but never rendered (should not happen) or removed
        if t not in seen:
            config_rows.append({"tag": t, "role": "sweep", "status": "pending", "stage": "", "reason": "", "log": ""})
    for s in manifest.get("skipped", []):  # constraint-skipped points were never rendered
        config_rows.append({"tag": s["tag"], "role": "sweep", "status": "skipped", "stage": "plan",
                            "reason": s["reason"], "log": "", **s.get("macros", {})})
    configs = pd.DataFrame(config_rows)
    measurements = pd.DataFrame(meas_rows)
    return Collected(configs, measurements, manifest)


def write_tables(collected: Collected, results_dir: Path) -> dict[str, Path]:
    """configs and measurements as parquet and csv under results_dir (atomic writes)."""
    results_dir = Path(results_dir)
    out = {}
    for name, df in (("configs", collected.configs), ("measurements", collected.measurements)):
        csv_path = results_dir / f"{name}.csv"
        atomic.write_text(csv_path, df.to_csv(index=False))
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        pq_path = results_dir / f"{name}.parquet"
        atomic.write_bytes(pq_path, buf.getvalue())
        out[name] = pq_path
    return out


def load_tables(results_dir: Path) -> Collected:
    """Tables written by write_tables (for report/compare of a sweep collected earlier)."""
    results_dir = Path(results_dir)
    try:
        configs = pd.read_parquet(results_dir / "configs.parquet")
        measurements = pd.read_parquet(results_dir / "measurements.parquet")
    except (OSError, ValueError) as e:
        raise SweepError(f"no collected tables in {results_dir} ({e}); run `python config_sweep.py collect SWEEP` first") from None
    manifest = {}
    if (results_dir / "manifest.json").is_file():
        manifest = json.loads((results_dir / "manifest.json").read_text())
    return Collected(configs, measurements, manifest)
