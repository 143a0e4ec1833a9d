"""Collect a sweep's result files into tables (pandas).

    configs       one row per job: tag, role, status, stage, reason, log, the macros,
                  GPU, driver, CUDA, commit, host, backend and the capture window it
                  used (cudaProfilerApi, whole run, ...), timings, forward time, the
                  node's fingerprint (GPU uuid, default SM clock, clocks/temperature/
                  power at the start) and how it was sampled (runs, samples, noise and
                  its source, why it stopped, throttled runs dropped)
    measurements  one row per job x workload x kernel x launch shape (long format): the
                  macros, the workload (its name; "" for a space without workloads),
                  kernel, grid, block, calls, instances, per-launch median/min/max/
                  mean/std ns, per-iteration total (median and std over iterations),
                  the per-iteration samples themselves (`iter_total_ns`, a list; the
                  runs they were pooled from in `runs`), their relative noise, and
                  host and GPU uuid

Both are written to results/<sweep>/ as parquet and csv (atomically), and are
what selection and the report read. Jobs the sweep planned but that have no
result yet appear in `configs` with status "pending" (or "running").

A space narrowed since earlier runs leaves job folders of points it no longer holds;
they stay on disk, untouched (reused if the space grows back), but selection must not
read them: `in_space(space, digest)` says which sweep jobs belong to the space as it is
now, and `collect(..., keep=)` leaves the others out of both tables.
"""

from __future__ import annotations

import io
import socket
from dataclasses import dataclass
from typing import Any
from pathlib import Path
from typing import Callable

import pandas as pd

from sweep.core import atomic
from sweep.node import resources
from sweep.node.lock import pid_alive
from sweep.core.errors import SweepError
from sweep.records import gpu_time
from sweep.records.evidence import Sampled
from sweep.records import JobConfig, Manifest, Status, read_json, read_result
from sweep.stats import summarize
from sweep.core.paths import COMMAND
from sweep.space import Config, Space, check, config_hash, make_config


@dataclass(frozen=True, slots=True)
class Collected:
    configs: pd.DataFrame
    measurements: pd.DataFrame
    manifest: Manifest


def job_dirs(sweep_dir: Path) -> list[Path]:
    """Job folders of a sweep (folders holding config.json; those starting with '_' are the driver's)."""
    return sorted(d for d in Path(sweep_dir).iterdir() if d.is_dir() and not d.name.startswith("_")
                  and (d / "config.json").is_file())


def read_manifest(sweep_dir: Path) -> Manifest:
    return Manifest.load(sweep_dir)


def process_gone(state: Any) -> bool:
    """A job's state.json naming a process on this host that no longer runs (a killed driver's
    or job's): not running, whatever the file says."""
    return isinstance(state, dict) and state.get("host") == socket.gethostname() and not pid_alive(state.get("pid"))


def resources_text(build: Any) -> str:
    """A build's kernels as the compiler sized them, one '; '-joined line ('' when unknown)."""
    rows = build.get("kernels") if isinstance(build, dict) else None
    return "; ".join(resources.summary(k) for k in rows if isinstance(k, dict)) if isinstance(rows, list) else ""


def _dry_built(d: Path, cfg: JobConfig) -> dict[str, Any] | None:
    """The build record a dry run left for this configuration, or None."""
    try:
        built = read_json(d / "built.json")
    except (OSError, SweepError):
        return None
    return built if isinstance(built, dict) and built.get("config_hash") == cfg.config_hash else None


def _unfinished(d: Path, cfg: JobConfig) -> tuple[Status, str]:
    """A job with no result of its configuration: running (its state.json says so), unless
    that state names a process on this host that is gone (a killed driver's job: pending,
    the next run measures it); a dry run's build is named in the reason."""
    try:
        state = read_json(d / "state.json")
    except (OSError, SweepError):
        state = None
    if state is not None:
        if process_gone(state):
            return Status.PENDING, "interrupted: its process is gone; the next run measures it"
        return Status.RUNNING, ""
    if _dry_built(d, cfg) is not None:
        return Status.BUILT, "built by a dry run; not measured yet"
    return Status.PENDING, ""


def in_space(space: Space, source_digest: str) -> Callable[[JobConfig], bool]:
    """Whether a sweep job measures a point of `space` as it is now: the point its strategy
    plans (a static plan; else a legal point: each value one of its parameter's, the
    constraints holding), rendered with the space's current settings and sources (its
    config hash). Jobs of other roles (baseline, best, race entrants) always count."""
    from sweep import plan as strategies   # the strategies' registry: only when a space is filtered

    planned: set[Config] | None = None
    if strategies.spec(space).plan is not None:
        planned = set(strategies.plan(space).configs)
    values = {p.macro: set(p.values) for p in space.swept}

    def keep(cfg: JobConfig) -> bool:
        if cfg.role != "sweep":
            return True
        try:
            config = make_config(space, {m: cfg.macros[m] for m in values})
        except (KeyError, TypeError, ValueError):   # a parameter the space no longer has, or gained
            return False
        if config.as_dict() != cfg.macros or config_hash(space, config, source_digest) != cfg.config_hash:
            return False
        if planned is not None:
            return config in planned
        return all(config[m] in vs for m, vs in values.items()) and check(space, config) is None

    return keep


def collect(sweep_dir: Path, keep: Callable[[JobConfig], bool] | None = None) -> Collected:
    """The sweep's tables; with `keep` (in_space), only the jobs it keeps."""
    sweep_dir = Path(sweep_dir)
    manifest = read_manifest(sweep_dir)
    config_rows, meas_rows = [], []
    seen = set()
    for d in job_dirs(sweep_dir):
        cfg = JobConfig.load(d)
        seen.add(d.name)
        if keep is not None and not keep(cfg):
            continue
        r = read_result(d)
        base = {"tag": d.name, "role": cfg.role, **cfg.macros}
        if r is None or r.config_hash != cfg.config_hash:
            status, reason = _unfinished(d, cfg)
            built = _dry_built(d, cfg) if status == Status.BUILT else None
            config_rows.append({**base, "status": status.value, "stage": "", "reason": reason, "log": "",
                                "config_hash": cfg.config_hash, "resources": resources_text((built or {}).get("build"))})
            continue
        env = r.env
        row = {
            **base, "status": r.status.value, "stage": r.stage, "reason": r.reason, "log": r.log, "config_hash": r.config_hash,
            "attempt": r.attempt, "gpu": env.get("gpu", ""), "driver": env.get("driver", ""),
            "cuda_runtime": env.get("cuda_runtime"), "commit": env.get("commit", ""), "host": env.get("host", ""),
            "backend": env.get("backend", ""), "capture": env.get("capture", ""), "forward_ms": r.forward_ms.get("median_ms"),
            "build_s": r.timings.get("build"), "verify_s": r.timings.get("verify"), "profile_s": r.timings.get("profile"),
            "parse_s": r.timings.get("parse"), "total_s": r.timings.get("total"),
            "gpu_mode": env.get("gpu_mode", "exclusive"), "gpu_contexts": env.get("gpu_contexts"),
            "gpu_interval": r.intervals.get("gpu"),
            "gpu_busy_s": (env.get("gpu_use") or {}).get("busy_s"), "gpu_outside": (env.get("gpu_use") or {}).get("outside"),
            "gpu_wait_s": (env.get("gpu_use") or {}).get("wait_s"),
            "objects_compiled": len(r.build.get("compiled", [])), "objects_cached": len(r.build.get("cached", [])),
            "finished_at": r.finished_at, "build_digest": build_digest(r.build.get("objects")),
            "resources": resources_text(r.build),
            **fingerprint(env), **sampling_columns(r.sampling),
        }
        config_rows.append(row)
        for m in r.measurements:
            meas_rows.append({
                **base, "status": r.status.value, "workload": m.workload, "kernel": m.kernel,
                "kernel_full": m.kernel_full,
                "grid": "x".join(map(str, m.grid)), "block": "x".join(map(str, m.block)),
                "threads_per_block": m.threads_per_block, "calls": m.calls, "instances": m.instances,
                "iterations": len(m.iter_total_ns), "median_ns": m.median_ns, "min_ns": m.min_ns, "max_ns": m.max_ns,
                "mean_ns": m.mean_ns, "std_ns": m.std_ns, "total_median_ns": m.total_median_ns,
                "total_std_ns": m.total_std_ns, "gpu": row["gpu"], "driver": row["driver"],
                "cuda_runtime": row["cuda_runtime"], "commit": row["commit"], "backend": row["backend"],
                "iter_total_ns": [float(x) for x in m.iter_total_ns], "runs": max(1, len(m.runs)),
                "noise": summarize(m.iter_total_ns).noise if m.iter_total_ns else None,
                "host": row["host"], "gpu_uuid": row["gpu_uuid"],
                "capture": row["capture"],
            })
    for t in manifest.tags:  # planned but never rendered (should not happen) or removed
        if t not in seen:
            config_rows.append({"tag": t, "role": "sweep", "status": "pending", "stage": "", "reason": "", "log": ""})
    for s in manifest.skipped:  # constraint-skipped points were never rendered
        config_rows.append({"tag": s.tag, "role": "sweep", "status": "skipped", "stage": "plan",
                            "reason": s.reason, "log": "", **s.macros})
    _gpu_seconds(config_rows)
    configs = pd.DataFrame(config_rows)
    measurements = pd.DataFrame(meas_rows)
    return Collected(configs, measurements, manifest)


def _gpu_seconds(rows: list[dict]) -> None:
    """Each measured job's GPU-seconds (`gpu_s`): its share of its GPU's measuring-phase wall time
    (sweep.records.gpu_time; in overlap mode several jobs share the GPU at once). A result without
    its interval counts its verify and profile seconds, as before."""
    timed = [r for r in rows if isinstance(r.get("gpu_interval"), (list, tuple)) and len(r["gpu_interval"]) == 2]
    got = gpu_time.shares([(gpu_time.gpu_key(r), *r["gpu_interval"]) for r in timed])
    for r, share in zip(timed, got):
        r["gpu_s"] = share
    for r in rows:
        r.pop("gpu_interval", None)
        if "gpu_s" not in r and r.get("status") == "ok":
            r["gpu_s"] = sum(r.get(k) or 0.0 for k in ("verify_s", "profile_s"))


FINGERPRINT = ("gpu_uuid", "default_sm_mhz", "start_sm_mhz", "start_mem_mhz", "start_temperature_c", "start_power_w")


def fingerprint(env: dict) -> dict:
    """The node facts a job recorded (sweep.node.clocks.fingerprint), one column each ("" / None when unknown)."""
    return {k: env.get(k, "" if k == "gpu_uuid" else None) for k in FINGERPRINT}


def sampling_columns(s: Sampled | None) -> dict:
    """How a job sampled its program (sweep.records.evidence.Sampled), as configs columns; a result written
    before sampling was recorded ran its program once."""
    s = s or Sampled(source="")
    stopped = s.stopped or {}
    return {"runs": s.runs, "samples": s.samples, "noise": s.noise, "noise_source": s.source,
            "stop_reason": stopped.get("reason", ""), "throttled_runs": s.throttled_runs,
            "throttled_samples": s.throttled_samples}


def build_digest(objects: dict[str, str] | None) -> str:
    """One hash over every object a build produced ("" when it recorded none)."""
    if not objects:
        return ""
    import hashlib

    return hashlib.sha256(repr(sorted(objects.items())).encode()).hexdigest()[:16]


def identical_builds(configs: pd.DataFrame, macros: list[str]) -> list[list[str]]:
    """Sets of sweep jobs whose macros differ but whose builds are byte-identical: their
    conf.cuh changed nothing (a conf.cuh earlier on the include path shadows it, or the
    macros are not read where the kernels are compiled)."""
    if configs.empty or "build_digest" not in configs or not macros:
        return []
    c = configs[(configs["role"] == "sweep") & configs["build_digest"].fillna("").astype(bool)]
    out = []
    for _, g in c.groupby("build_digest"):
        cols = [m for m in macros if m in g]
        if len(g) > 1 and len(g[cols].drop_duplicates()) > 1:
            out.append(sorted(g["tag"]))
    return out


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
        raise SweepError(f"no collected tables in {results_dir} ({e}); run `{COMMAND} collect SWEEP` first") from None
    manifest = None
    if (results_dir / "manifest.json").is_file():
        manifest = Manifest.from_dict(read_json(results_dir / "manifest.json"), results_dir / "manifest.json")
    return Collected(configs, measurements, manifest)


FAILED = {Status.COMPILE_FAILED, Status.VERIFY_FAILED, Status.RUNTIME_FAILED, Status.TIMEOUT, Status.PREEMPTED,
          Status.CANCELLED}


def nothing_measured(configs: pd.DataFrame) -> str:
    """The line for a sweep with no measurement: points at the failures only when some job
    failed, else says what became of the jobs (all skipped, pending, ...)."""
    counts = configs["status"].value_counts() if len(configs) and "status" in configs else pd.Series(dtype=int)
    if any(str(s) in FAILED for s in counts.index):
        why = "see the failures above"
    elif len(counts):
        why = "no job failed: " + ", ".join(f"{n} {s}" for s, n in counts.items())
    else:
        why = "no job was planned"
    return f"no configuration was measured: nothing to select ({why})"

