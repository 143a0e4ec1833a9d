"""One job's records: config.json (JobSettings, JobConfig) and result.json (JobResult)."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from sweep.core import atomic
from sweep.core.errors import SweepError
from sweep.records.evidence import Sampled
from sweep.profile import Measurement
from sweep.records.base import Damaged, Stale, Status, build_record, check_schema, now, read_json
from sweep.core.paths import COMMAND

CONFIG_SCHEMA = "sweep-job/2"
RENDER_AGAIN = f"render the job again with `{COMMAND} run SPACE.yaml`"


@dataclass(frozen=True, slots=True)
class JobSettings:
    """How a job runs, decided by the driver and kept in config.json, so that a job
    folder reruns by hand (`python -m sweep.node.job DIR`) exactly as the sweep ran it."""

    arch: str = ""                      # resolved architecture override ("" : build.arch)
    build_jobs: int = 0                 # make -j (0: the node's CPUs)
    timeout_s: float = 1800.0           # per program run (build, verify, profile)
    nsys: str = ""                      # explicit profiler paths (""; the node's $NSYS / $NCU / PATH)
    ncu: str = ""
    pythonpath: str = ""                # where the framework is importable from, for the job process
    cache_dir: str = ""                 # where backends keep what they build once (cupti: its library);
                                        # "": <jobs root>/_cache/<backend>

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "JobSettings":
        return cls(**{k: v for k, v in d.items() if k in {f.name for f in fields(cls)}})


@dataclass(frozen=True, slots=True)
class JobConfig:
    """What a job reads from its config.json on the GPU node."""

    sweep: str
    tag: str
    macros: dict[str, int]
    config_hash: str
    space_path: str
    commit: str
    target: dict[str, Any]              # name, source_dir, verify (commands, or "profile"), profile, events, check_args
    build: dict[str, Any]               # arch, nvcc_flags, make_targets, jobs
    run: dict[str, Any]                 # batch, seq_len, warmup, iterations, args, verify
    profile: dict[str, Any]             # backend, ncu_iterations
    values: dict[str, str] = field(default_factory=dict)   # extra placeholder values the target's prepare() made
    role: str = "sweep"                 # sweep | baseline | best: why this job exists
    # The space's workloads, each with its program's commands (render.job_config); []: run's one run
    workloads: list[dict[str, Any]] = field(default_factory=list)
    settings: JobSettings = field(default_factory=JobSettings)
    schema: str = CONFIG_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = "config.json") -> "JobConfig":
        d = check_schema(data, path, CONFIG_SCHEMA, RENDER_AGAIN)
        return build_record(cls, d, path, RENDER_AGAIN, settings=JobSettings.from_dict(d.get("settings") or {}))

    @classmethod
    def load(cls, job_dir: Path) -> "JobConfig":
        path = Path(job_dir) / "config.json"
        try:
            data = read_json(path)
        except OSError as e:
            raise SweepError(f"cannot read {path}: {e.strerror}; {RENDER_AGAIN}") from None
        except Damaged as e:
            raise SweepError(f"{e}; {RENDER_AGAIN}") from None
        return cls.from_dict(data, path)


# ---------------------------------------------------------------------------
# result.json
# ---------------------------------------------------------------------------

RESULT_SCHEMA = "sweep-result/2"
RESULT_SCHEMA_V1 = "sweep-result/1"    # read as /2 without `sampling` (a /1 job ran its program once)


@dataclass(frozen=True, slots=True)
class JobResult:
    sweep: str
    tag: str
    config_hash: str
    macros: dict[str, int]
    status: Status
    stage: str = ""                     # build | verify | profile | parse | job | scheduler
    reason: str = ""
    log: str = ""
    measurements: tuple[Measurement, ...] = ()
    forward_ms: dict[str, float] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)    # seconds: build, verify, profile, parse, total
    intervals: dict[str, list[float]] = field(default_factory=dict)  # stage -> [start, end], epoch seconds
    build: dict[str, Any] = field(default_factory=dict)        # compiled / cached objects
    role: str = "sweep"
    attempt: int = 1
    history: tuple[dict[str, str], ...] = ()                   # earlier attempts: status, stage, reason
    finished_at: str = ""
    sampling: Sampled | None = None                            # how the profiled program was sampled
    schema: str = RESULT_SCHEMA

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    @classmethod
    def ended(cls, cfg: JobConfig, status: Status | str, stage: str = "", reason: str = "", log: Path | str = "",
              previous: "JobResult | None" = None, **extra: Any) -> "JobResult":
        """The record of a job that ended: the one constructor every executor uses.
        `previous` (the folder's last result) becomes history when it is of the same
        configuration, and the attempt counts on from it."""
        attempt, history = 1, ()
        if previous is not None and previous.config_hash == cfg.config_hash:
            attempt, history = previous.attempt + 1, previous.history + (previous.summary(),)
        extra.setdefault("attempt", attempt)
        extra.setdefault("history", history)
        return cls(sweep=cfg.sweep, tag=cfg.tag, config_hash=cfg.config_hash, macros=dict(cfg.macros),
                   status=Status(status), stage=stage, reason=reason, log=str(log or ""), role=cfg.role,
                   finished_at=now(), **extra)

    def summary(self) -> dict[str, str]:
        """This attempt as a history entry."""
        return {"status": self.status.value, "stage": self.stage, "reason": self.reason}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["measurements"] = [m.to_dict() for m in self.measurements]
        d["history"] = list(self.history)
        d["sampling"] = self.sampling.to_dict() if self.sampling is not None else None
        return d

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = "result.json") -> "JobResult":
        if isinstance(data, dict) and data.get("schema") == RESULT_SCHEMA_V1:
            data = {**data, "schema": RESULT_SCHEMA}
        d = check_schema(data, path, RESULT_SCHEMA, RERUN)
        try:
            ms = tuple(Measurement.from_dict(m) for m in d.get("measurements", ()))
            status = Status(d.get("status"))
            sampling = Sampled.from_dict(d["sampling"]) if d.get("sampling") else None
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise Damaged(f"{path}: not a valid JobResult ({type(e).__name__}: {e}); {RERUN}") from None
        return build_record(cls, d, path, RERUN, measurements=ms, status=status, history=tuple(d.get("history", ())),
                      sampling=sampling)


RERUN = f"run the sweep again to measure it anew, or remove the old results with `{COMMAND} clean SWEEP --all`"


def write_result(job_dir: Path, result: JobResult) -> Path:
    path = Path(job_dir) / "result.json"
    atomic.write_json(path, result.to_dict())
    return path


def read_result(job_dir: Path) -> JobResult | None:
    """The job's result, or None when it has none.

    One that cannot be read as this version's result is moved aside (kept, never deleted) and
    counts as no result, so the configuration is measured again: of another schema version to
    result.json.stale-<time> (refusing it looped: the rerun met the same file), unreadable, of
    the wrong shape, or a directory in its place to result.json.bad-<time>.
    """
    path = Path(job_dir) / "result.json"
    try:
        if path.is_dir() and not path.is_symlink():
            raise Damaged(f"{path} is a directory, not a result")
        data = read_json(path)
        return JobResult.from_dict(data, path)
    except OSError:
        return None
    except (Stale, Damaged) as e:
        aside = set_aside(path, "stale" if isinstance(e, Stale) else "bad")
        print(f"note: {str(e).split('; ')[0]}; moved it aside to {aside}; the configuration will be measured again",
              file=sys.stderr)
        return None


def set_aside(path: Path, why: str = "bad") -> Path:
    """Rename a damaged (or stale) file out of the way (same folder), keeping it for inspection."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.{why}-{stamp}-{os.getpid()}")
    try:
        os.replace(path, aside)
    except OSError:
        pass
    return aside
