"""The contract between stages: every record a stage writes and a later one reads.

    Status        one job's outcome (final) or state (pending, running)
    JobConfig     config.json: everything a job needs on the GPU node
    JobResult     result.json: what a job did, with its measurements
    Manifest      jobs/<sweep>/sweep.json: the plan and every run of the driver
    Candidate, Choice, Best
                  results/<sweep>/best.json: each group's pick and its evidence (its
                  Certification and ShapeBest records, like result.json's Sampled,
                  are in sweep.evidence)
    Confirmation  results/<sweep>/confirmation.json: the combined pick end to end

Every file carries a `schema` ("sweep-<kind>/<version>"). A reader refuses a file
of another schema in one line that names the file and the command that writes it
anew (`Stale`); a file of the right schema but the wrong shape is `Damaged`.
Records are frozen; `to_dict()` gives what is written and `from_dict()` reads it.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

from sweep import atomic
from sweep.errors import SweepError
from sweep.evidence import Certification, Sampled, ShapeBest
from sweep.profile import Measurement


class Status(str, Enum):
    """A job's outcome. The first eight are final; pending and running are what
    `status` and the tables show for a job that has not ended."""

    OK = "ok"                           # measured
    SKIPPED = "skipped"                 # illegal: a constraint, a static_assert, a resource limit
    COMPILE_FAILED = "compile_failed"
    VERIFY_FAILED = "verify_failed"     # built, but computes wrong results: never picked
    RUNTIME_FAILED = "runtime_failed"   # a program crashed, or a profiler or tool failed
    TIMEOUT = "timeout"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    PENDING = "pending"
    RUNNING = "running"

    def __str__(self) -> str:
        return self.value

    def __hash__(self) -> int:  # as its value, so "ok" finds Status.OK in a set or dict
        return hash(self.value)

    @property
    def failed(self) -> bool:
        return self in FAILED

    @property
    def final(self) -> bool:
        """Not run again on resume (failures only with --retry-failed)."""
        return self in DONE


FAILED = frozenset({Status.COMPILE_FAILED, Status.VERIFY_FAILED, Status.RUNTIME_FAILED, Status.TIMEOUT,
                    Status.PREEMPTED, Status.CANCELLED})
DONE = frozenset({Status.OK, Status.SKIPPED, Status.COMPILE_FAILED, Status.VERIFY_FAILED})
NOT_FAILED = frozenset({Status.OK, Status.SKIPPED, Status.PENDING, Status.RUNNING})
FINAL = frozenset(Status) - {Status.PENDING, Status.RUNNING}


def now() -> str:
    """UTC time, as every record writes it."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Stale(SweepError):
    """A record of another schema version: refused with the command that rewrites it."""


class Damaged(SweepError):
    """A record of the right schema whose content is not what that schema says."""


def _check_schema(data: Any, path: Path | str, schema: str, rewrite: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise Damaged(f"{path} holds {type(data).__name__}, not a {schema} record; {rewrite}")
    found = data.get("schema")
    if found != schema:
        raise Stale(f"{path} has schema {found!r}, this version reads {schema!r}; {rewrite}")
    return data


def _build(cls: type, data: Mapping[str, Any], path: Path | str, rewrite: str, **converted: Any) -> Any:
    """cls(**data) with `converted` fields replaced; a missing or unknown key is Damaged."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise Damaged(f"{path}: unknown field(s) {', '.join(unknown)} for {cls.__name__}; {rewrite}")
    try:
        return cls(**{**data, **converted})
    except TypeError as e:
        raise Damaged(f"{path}: not a valid {cls.__name__} ({e}); {rewrite}") from None


def read_json(path: Path) -> Any:
    """A JSON file's content; Damaged when it is not JSON (OSError passes through)."""
    try:
        return json.loads(Path(path).read_bytes())
    except ValueError as e:
        raise Damaged(f"{path} is not valid JSON ({e})") from None


# ---------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------

CONFIG_SCHEMA = "sweep-job/2"
RENDER_AGAIN = "render the job again with `python config_sweep.py run SPACE.yaml`"


@dataclass(frozen=True, slots=True)
class JobSettings:
    """How a job runs, decided by the driver and kept in config.json, so that a job
    folder reruns by hand (`python -m sweep.job DIR`) exactly as the sweep ran it."""

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
    settings: JobSettings = field(default_factory=JobSettings)
    schema: str = CONFIG_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = "config.json") -> "JobConfig":
        d = _check_schema(data, path, CONFIG_SCHEMA, RENDER_AGAIN)
        return _build(cls, d, path, RENDER_AGAIN, settings=JobSettings.from_dict(d.get("settings") or {}))

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
        d = _check_schema(data, path, RESULT_SCHEMA, RERUN)
        try:
            ms = tuple(Measurement.from_dict(m) for m in d.get("measurements", ()))
            status = Status(d.get("status"))
            sampling = Sampled.from_dict(d["sampling"]) if d.get("sampling") else None
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise Damaged(f"{path}: not a valid JobResult ({type(e).__name__}: {e}); {RERUN}") from None
        return _build(cls, d, path, RERUN, measurements=ms, status=status, history=tuple(d.get("history", ())),
                      sampling=sampling)


RERUN = "run the sweep again to measure it anew, or remove the old results with `python config_sweep.py clean SWEEP --all`"


def write_result(job_dir: Path, result: JobResult) -> Path:
    path = Path(job_dir) / "result.json"
    atomic.write_json(path, result.to_dict())
    return path


def read_result(job_dir: Path) -> JobResult | None:
    """The job's result, or None when it has none.

    A result of another schema version is refused (Stale). One that is unreadable,
    or of this schema but the wrong shape, is moved aside to result.json.bad-<time>
    (kept, never deleted) and counts as no result, so the configuration is measured again.
    """
    path = Path(job_dir) / "result.json"
    try:
        data = read_json(path)
        return JobResult.from_dict(data, path)
    except OSError:
        return None
    except Stale:
        raise
    except Damaged as e:
        aside = set_aside(path)
        print(f"note: {e}; moved it aside to {aside.name}; the configuration will be measured again", file=sys.stderr)
        return None


def set_aside(path: Path) -> Path:
    """Rename a damaged file out of the way (same folder), keeping it for inspection."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.bad-{stamp}-{os.getpid()}")
    try:
        os.replace(path, aside)
    except OSError:
        pass
    return aside


# ---------------------------------------------------------------------------
# sweep.json
# ---------------------------------------------------------------------------

MANIFEST_SCHEMA = "sweep-manifest/1"
MANIFEST = "sweep.json"


@dataclass(frozen=True, slots=True)
class Skip:
    """A planned point that breaks a constraint: never rendered."""

    tag: str
    reason: str
    macros: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Manifest:
    sweep: str
    space: str                          # the space file the sweep was run with
    strategy: str
    backend: str
    executor: str
    grid_size: int
    grid_product: str
    commit: str
    source_digest: str
    created: str
    tags: tuple[str, ...] = ()
    skipped: tuple[Skip, ...] = ()
    note: str = ""
    runs: tuple[dict[str, Any], ...] = ()   # one entry per driver run (bench/sweep_overhead.py reads them)
    space_snapshot: str = ""            # the space file as run, inside the sweep folder
    schema: str = MANIFEST_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tags"], d["skipped"], d["runs"] = list(self.tags), [asdict(s) for s in self.skipped], list(self.runs)
        return d

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = MANIFEST) -> "Manifest":
        rewrite = "run the sweep again (`python config_sweep.py run SPACE.yaml`) to rewrite it"
        d = _check_schema(data, path, MANIFEST_SCHEMA, rewrite)
        try:
            skipped = tuple(Skip(**s) for s in d.get("skipped", ()))
        except TypeError as e:
            raise Damaged(f"{path}: a skipped entry is not valid ({e}); {rewrite}") from None
        return _build(cls, d, path, rewrite, tags=tuple(d.get("tags", ())), skipped=skipped,
                      runs=tuple(d.get("runs", ())))

    def save(self, sweep_dir: Path) -> Path:
        path = Path(sweep_dir) / MANIFEST
        atomic.write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, sweep_dir: Path) -> "Manifest":
        path = Path(sweep_dir) / MANIFEST
        try:
            return cls.from_dict(read_json(path), path)
        except OSError:
            raise SweepError(f"{sweep_dir} is not a sweep (no {MANIFEST}); run `python config_sweep.py run SPACE.yaml` "
                             "first") from None

    def with_run(self, run: Mapping[str, Any]) -> "Manifest":
        return replace(self, runs=self.runs + (dict(run),))


# ---------------------------------------------------------------------------
# best.json, confirmation.json
# ---------------------------------------------------------------------------

BEST_SCHEMA = "sweep-best/2"
CONFIRMATION_SCHEMA = "sweep-confirmation/1"
RECOLLECT = "rewrite it with `python config_sweep.py collect SWEEP`"


@dataclass(frozen=True, slots=True)
class Candidate:
    values: dict[str, int]
    tag: str          # the job that measured it fastest
    ns: float         # per-iteration time of the group's kernels (median over jobs with these values)
    std_ns: float     # spread over iterations (standard deviation; 0 with one sample)
    jobs: int
    samples: int = 0              # per-iteration samples pooled over its jobs (0: the table had none)
    iqr_ns: float | None = None   # their interquartile range (None: fewer than 3 samples)
    threads: int = 0              # threads per block of the group's kernels (the largest)
    node: str = ""                # GPU (uuid, else host) of the job that measured it fastest


@dataclass(frozen=True, slots=True)
class Choice:
    """A group's pick and the evidence for it (see sweep.select).

    margin: runner-up / pick - 1 (a fraction). verdict: "faster" (the pick is faster than
    the runner-up beyond the noise), "tie" or "unknown" (too few samples: never beyond
    noise); beyond_noise is verdict == "faster". noise_source: where the samples came
    from ("iterations", "runs", "race" or "unknown"). margin_ci_low/high: the margin's
    interval at `confidence` (rank-based, sweep.stats.compare; None where unbounded or
    unknown). noise_ns: the noise the margin was weighed against (ns): the interval's
    half-width, or 2 x the combined std for tables without samples.
    """

    macros: tuple[str, ...]
    kernels: tuple[str, ...]          # kernel names measured for this group
    values: dict[str, int]
    best: Candidate                   # the picked candidate
    runner_up: Candidate | None
    margin: float | None
    noise_ns: float | None
    beyond_noise: bool
    default_ns: float | None = None
    speedup_vs_default: float | None = None
    candidates: tuple[Candidate, ...] = ()
    note: str = ""
    noise_source: str = "unknown"
    verdict: str = "unknown"
    margin_ci_low: float | None = None
    margin_ci_high: float | None = None
    confidence: float | None = None
    certification: Certification | None = None
    shapes: tuple[ShapeBest, ...] = ()
    nodes: tuple[str, ...] = ()       # the GPUs (uuid, else host) the compared candidates were measured on

    @property
    def certified(self) -> bool:
        return self.certification is not None and self.certification.certified

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: Path | str) -> "Choice":
        try:
            cert = d.get("certification")
            return _build(cls, d, path, RECOLLECT, macros=tuple(d["macros"]), kernels=tuple(d["kernels"]),
                          best=Candidate(**d["best"]),
                          runner_up=Candidate(**d["runner_up"]) if d.get("runner_up") else None,
                          candidates=tuple(Candidate(**c) for c in d.get("candidates", ())),
                          certification=Certification.from_dict(cert) if cert else None,
                          shapes=tuple(ShapeBest.from_dict(x) for x in d.get("shapes", ())),
                          nodes=tuple(d.get("nodes", ())))
        except (KeyError, TypeError) as e:
            raise Damaged(f"{path}: a choice is not valid ({type(e).__name__}: {e}); {RECOLLECT}") from None


@dataclass(frozen=True, slots=True)
class Best:
    sweep: str
    choices: tuple[Choice, ...]
    config: dict[str, int]            # the combined pick, every macro
    unmeasured: tuple[str, ...] = ()  # parameters whose kernels never appeared in a profile
    notes: tuple[str, ...] = ()
    schema: str = BEST_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = "best.json") -> "Best":
        d = _check_schema(data, path, BEST_SCHEMA, RECOLLECT)
        choices = d.get("choices")
        if not isinstance(choices, (list, tuple)):
            raise Damaged(f"{path}: 'choices' must be a list; {RECOLLECT}")
        return _build(cls, d, path, RECOLLECT, choices=tuple(Choice.from_dict(c, path) for c in choices),
                      unmeasured=tuple(d.get("unmeasured", ())), notes=tuple(d.get("notes", ())))


@dataclass(frozen=True, slots=True)
class Confirmation:
    """The combined pick and the target's defaults, end to end (ns: governed kernels per iteration)."""

    sum_of_group_bests_ns: float | None = None
    best_total_ns: float | None = None
    default_total_ns: float | None = None
    best_forward_ms: float | None = None
    default_forward_ms: float | None = None
    best_vs_sum_of_bests: float | None = None
    speedup_vs_default: float | None = None
    forward_speedup_vs_default: float | None = None
    schema: str = CONFIRMATION_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, path: Path | str = "confirmation.json") -> "Confirmation":
        return _build(cls, _check_schema(data, path, CONFIRMATION_SCHEMA, RECOLLECT), path, RECOLLECT)


def load_record(cls: type, path: Path) -> Any | None:
    """A Best or Confirmation from its file, or None when there is none."""
    try:
        data = read_json(path)
    except OSError:
        return None
    return cls.from_dict(data, path)
