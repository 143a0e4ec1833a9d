"""One configuration's job on the GPU node: build -> verify -> profile -> result.json.

    python -m sweep.job jobs/<sweep>/<tag>        (what job.sbatch and the executors run)

Every job ends with a result.json written atomically, whatever happened, with
one Status and, for failures, the stage, the reason and the log to read:

    ok              measured
    skipped         illegal configuration (a constraint, or the target's static_assert)
    compile_failed  the build failed for another reason
    verify_failed   the programs built but compute wrong results: never picked
    runtime_failed  a program crashed, or a profiler or tool failed
    timeout         the scheduler's time limit ended it
    preempted       the scheduler took the node back (it is requeued)
    cancelled       somebody cancelled it

While it runs, state.json says where (host, pid, stage, start), so `status`
can show a sweep from its files alone, from any shell.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sweep import atomic, build as build_mod
from sweep.errors import SweepError
from sweep.profile import Measurement
from sweep.render import JobConfig

RESULT_SCHEMA = "sweep-result/1"
STATUSES = ("ok", "skipped", "compile_failed", "verify_failed", "runtime_failed", "timeout", "preempted", "cancelled")
FAILED = ("compile_failed", "verify_failed", "runtime_failed", "timeout", "preempted", "cancelled")
DONE = ("ok", "skipped", "compile_failed", "verify_failed")   # final unless --retry-failed (the last two)


@dataclass(frozen=True, slots=True)
class JobResult:
    sweep: str
    tag: str
    config_hash: str
    macros: dict[str, int]
    status: str
    stage: str = ""                     # build | verify | profile | parse | scheduler
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
    schema: str = RESULT_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["measurements"] = [m.to_dict() for m in self.measurements]
        d["history"] = list(self.history)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JobResult":
        d = dict(d)
        d["measurements"] = tuple(Measurement.from_dict(m) for m in d.get("measurements", ()))
        d["history"] = tuple(d.get("history", ()))
        return cls(**d)


def write_result(job_dir: Path, result: JobResult) -> Path:
    path = Path(job_dir) / "result.json"
    atomic.write_json(path, result.to_dict())
    return path


def read_result(job_dir: Path) -> JobResult | None:
    """The job's result, or None when it has none (or an unreadable one: treated as not done)."""
    path = Path(job_dir) / "result.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if data.get("schema") != RESULT_SCHEMA:
        raise SweepError(f"{path} has schema {data.get('schema')!r}; this code reads {RESULT_SCHEMA!r}. "
                         f"Re-run the sweep, or remove the old results with `python config_sweep.py clean`")
    return JobResult.from_dict(data)


# ---------------------------------------------------------------------------
# Running one job
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tools:
    """Where the profilers are: NSYS / NCU environment variables, else PATH."""

    nsys: str | None = None
    ncu: str | None = None

    @classmethod
    def find(cls) -> "Tools":
        return cls(os.environ.get("NSYS") or shutil.which("nsys"), os.environ.get("NCU") or shutil.which("ncu"))


class gpu_lock:
    """Exclusive use of this job's GPU for its measuring stages, when the local executor
    runs a second job per GPU ahead (SWEEP_GPU_LOCK names the GPU's lock file): the
    next job starts and the last one's profile is post-processed while this one runs,
    yet no two jobs ever measure on one GPU at once."""

    def __enter__(self) -> "gpu_lock":
        self.f = None
        path = os.environ.get("SWEEP_GPU_LOCK")
        if path:
            import fcntl

            self.f = open(path, "a")
            fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        if self.f is not None:
            import fcntl

            fcntl.flock(self.f, fcntl.LOCK_UN)
            self.f.close()


class _Termination:
    """Set when the scheduler sends SIGTERM (scancel, or a time limit without warning): a
    stage's program killed by that SIGTERM means the job was cancelled, not that it crashed."""

    requested = False

    @classmethod
    def watch(cls) -> None:
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum, frame):
            cls.requested = True
            if callable(previous):
                previous(signum, frame)  # submitit's own handling (it bypasses SIGTERM)
            elif previous == signal.SIG_DFL:
                raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, on_term)


def slurm_job_id() -> str:
    """This job's id as scancel accepts it: ARRAY_TASK for an array task (Slurm 22.05 refuses the raw id)."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID", "")


@dataclass(frozen=True, slots=True)
class Capture:
    """What the profile run left for parsing."""

    backend: str
    log: Path
    output: Path           # events.json, the .nsys-rep, or ncu's CSV
    stdout: str
    tool: str = ""
    iterations: int | None = None


class JobFailed(Exception):
    def __init__(self, status: str, stage: str, reason: str, log: Path | None = None):
        super().__init__(reason)
        self.status, self.stage, self.reason, self.log = status, stage, reason, log


def expand(command: list[str], values: dict[str, Any], args: list[str]) -> list[str]:
    """Fill a command template: '{args}' becomes the run's extra arguments, other
    {placeholders} are substituted inside each word."""
    out = []
    for word in command:
        if word == "{args}":
            out.extend(args)
            continue
        try:
            out.append(word.format(**values))
        except KeyError as e:
            raise SweepError(f"command word {word!r} uses {e.args[0]!r}; placeholders: {', '.join(sorted(values))}, args") from None
    return out


def _run(cmd: list[str], log: Path, stage: str, timeout_s: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs cmd with its output appended to `log`; classifies crashes and missing programs."""
    with open(log, "a") as f:
        f.write(f"\n$ {shlex.join(cmd)}\n")
        f.flush()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout_s, env=env)
        except FileNotFoundError:
            raise JobFailed("runtime_failed", stage, f"{cmd[0]} not found on {socket.gethostname()}", log) from None
        except subprocess.TimeoutExpired:
            raise JobFailed("runtime_failed", stage, f"{Path(cmd[0]).name} ran past {timeout_s:.0f} s", log) from None
        f.write(p.stdout)
        f.write(p.stderr)
    if p.returncode < 0:
        sig = signal.Signals(-p.returncode).name if -p.returncode in signal.Signals._value2member_map_ else str(-p.returncode)
        if _Termination.requested:
            raise JobFailed("cancelled", stage, f"cancelled during {stage}: the scheduler terminated the job", log)
        raise JobFailed("runtime_failed", stage, f"{Path(cmd[0]).name} was killed by {sig}", log)
    return p


def _last_line(text: str) -> str:
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


class Job:
    """The stages of one job; each raises JobFailed to end it with a status."""

    def __init__(self, job_dir: Path, tools: Tools | None = None, timeout_s: float = 1800):
        self.dir = Path(job_dir).resolve()
        self.cfg = JobConfig.load(self.dir)
        self.tools = tools or Tools.find()
        self.timeout_s = timeout_s
        self.timings: dict[str, float] = {}
        self.intervals: dict[str, list[float]] = {}
        self.build_info: dict[str, Any] = {}
        self.env: dict[str, Any] = {"host": socket.gethostname(), "commit": self.cfg.commit,
                                    "backend": self.cfg.profile["backend"]}

    # -- helpers ---------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        r = self.cfg.run
        return {"build": str(self.dir / "build"), "job": str(self.dir), "weights": self.cfg.model.get("weights", ""),
                "reference": self.cfg.model.get("reference", ""), "batch": r["batch"], "seq_len": r["seq_len"],
                "iterations": r["iterations"], "warmup": r["warmup"], "events_json": str(self.dir / "events.json")}

    def program(self, extra: list[str] = (), iterations: int | None = None) -> list[str]:
        values = self.values()
        if iterations is not None:
            values["iterations"] = iterations
        return expand(list(self.cfg.target["profile"]) + list(extra), values, list(self.cfg.run["args"]))

    def mark(self, stage: str, start: float) -> None:
        """Record a stage's wall-clock interval (epoch seconds), for overhead accounting."""
        self.intervals[stage] = [start, time.time()]

    def state(self, stage: str) -> None:
        atomic.write_json(self.dir / "state.json", {"stage": stage, "host": socket.gethostname(), "pid": os.getpid(),
                                                     "started": _now(), "slurm_job": slurm_job_id()})

    # -- stages ----------------------------------------------------------------
    def build(self) -> None:
        self.state("build")
        t0 = time.monotonic()
        arch = os.environ.get("SWEEP_ARCH") or build_mod.resolve_arch(self.cfg.build["arch"])
        jobs = self.cfg.build.get("jobs", 0) or int(os.environ.get("SWEEP_BUILD_JOBS") or 0)
        start = time.time()
        out = build_mod.build(self.dir, arch, jobs, self.timeout_s)
        self.timings["build"] = time.monotonic() - t0
        self.mark("build", start)
        self.build_info = {"arch": arch, "compiled": list(out.compiled), "cached": list(out.cached)}
        if not out.ok:
            raise JobFailed(out.status, "build", out.reason, out.log)

    def _load_built(self) -> None:
        """Build facts from a separate build stage (the local executor builds on CPUs first)."""
        try:
            built = json.loads((self.dir / "built.json").read_text())
        except (OSError, ValueError):
            raise JobFailed("runtime_failed", "build", "measure stage without a build: built.json is missing") from None
        if built.get("config_hash") != self.cfg.config_hash:
            raise JobFailed("runtime_failed", "build", "built.json belongs to another configuration: build again")
        self.build_info = built.get("build", {})
        self.timings["build"] = built.get("seconds", 0.0)
        if built.get("interval"):
            self.intervals["build"] = built["interval"]

    def verify(self) -> None:
        if not self.cfg.run.get("verify", True) or not self.cfg.target["verify"]:
            return
        self.state("verify")
        t0, start = time.monotonic(), time.time()
        log = self.dir / "verify.log"
        log.write_text("")
        for template in self.cfg.target["verify"]:
            cmd = expand(list(template), self.values(), list(self.cfg.run["args"]))
            p = _run(cmd, log, "verify", self.timeout_s)
            if p.returncode != 0:
                raise JobFailed("verify_failed", "verify",
                                f"{Path(cmd[0]).name} exit {p.returncode}: {_last_line(p.stderr) or _last_line(p.stdout)}", log)
        self.timings["verify"] = time.monotonic() - t0
        self.mark("verify", start)

    def capture(self) -> "Capture":
        """Run the timing program under the backend (needs the GPU)."""
        from sweep.profile import ncu, nsys

        self.state("profile")
        backend = self.cfg.profile["backend"]
        log = self.dir / "profile.log"
        log.write_text("")
        t0, start = time.monotonic(), time.time()
        if backend == "events":
            if not self.cfg.target["events"]:
                raise JobFailed("runtime_failed", "profile", f"target {self.cfg.target['name']} has no events timing; use nsys or ncu")
            out = self.dir / "events.json"
            out.unlink(missing_ok=True)
            p = _run(self.program(list(self.cfg.target["events"])), log, "profile", self.timeout_s)
            self._check(p, log)
            cap = Capture(backend, log, out, p.stdout)
        elif backend == "nsys":
            tool = self._tool("nsys", self.tools.nsys)
            base = self.dir / "profile"
            rep = base.with_suffix(".nsys-rep")
            rep.unlink(missing_ok=True)
            p = _run(nsys.profile_command(self.program(), base, tool), log, "profile", self.timeout_s)
            self._check(p, log)
            cap = Capture(backend, log, rep, p.stdout, tool)
        elif backend == "ncu":
            tool = self._tool("ncu", self.tools.ncu)
            iters = int(self.cfg.profile.get("ncu_iterations", 3))
            csv = self.dir / "profile_ncu.csv"
            csv.unlink(missing_ok=True)
            p = _run(ncu.profile_command(self.program(iterations=iters), csv, tool), log, "profile", self.timeout_s)
            self._check(p, log)
            cap = Capture(backend, log, csv, p.stdout, tool, iters)
        else:
            raise JobFailed("runtime_failed", "profile", f"unknown backend {backend!r}")
        self.timings["profile"] = time.monotonic() - t0
        self.mark("profile", start)
        return cap

    def parse(self, cap: "Capture") -> tuple[list[Measurement], dict[str, float]]:
        """Turn a capture into Measurements (CPU only: runs outside the GPU lock)."""
        from sweep.profile import events, ncu, nsys

        t1, start = time.monotonic(), time.time()
        stdout = cap.stdout
        if cap.backend == "events":
            text = self._read(cap.output, cap.log)
            ms, forward = events.parse_json(text, source=str(cap.output)), events.forward_ms(text, source=str(cap.output))
            stdout = text  # device facts come from the JSON file
        elif cap.backend == "nsys":
            sqlite = cap.output.with_suffix(".sqlite")
            self._check(_run(nsys.export_command(cap.output, sqlite, cap.tool), cap.log, "parse", self.timeout_s), cap.log, "parse")
            ms, forward = nsys.parse_sqlite(sqlite), _forward_from_stdout(cap.stdout)
        else:
            ms, forward = ncu.parse_csv(self._read(cap.output, cap.log), iterations=cap.iterations), _forward_from_stdout(cap.stdout)
        self.timings["parse"] = time.monotonic() - t1
        self.mark("parse", start)
        if not ms:
            raise JobFailed("runtime_failed", "parse", "the profile holds no kernel launches in the timed iterations", cap.log)
        self.env.update(_device_from_stdout(stdout))
        return ms, forward

    def _tool(self, name: str, path: str | None) -> str:
        if not path:
            raise JobFailed("runtime_failed", "profile",
                            f"{name} not found on {socket.gethostname()}: set {name.upper()}=/path/to/{name} or load its module "
                            f"(slurm.setup), or use profile.backend: events")
        return path

    def _check(self, p: subprocess.CompletedProcess, log: Path, stage: str = "profile") -> None:
        if p.returncode != 0:
            raise JobFailed("runtime_failed", stage,
                            f"{Path(p.args[0]).name} exit {p.returncode}: {_last_line(p.stderr) or _last_line(p.stdout)}", log)

    def _read(self, path: Path, log: Path) -> str:
        try:
            return path.read_text()
        except OSError:
            raise JobFailed("runtime_failed", "parse", f"the profile run wrote no {path.name}", log) from None

    # -- the whole job -----------------------------------------------------------
    def run(self, stages: str = "all") -> JobResult:
        """stages: all | build (compile only: --dry-run) | measure (after a separate build)."""
        t0 = time.monotonic()
        previous = read_result(self.dir)
        attempt = (previous.attempt + 1) if previous and previous.config_hash == self.cfg.config_hash else 1
        history = (previous.history + ({"status": previous.status, "stage": previous.stage, "reason": previous.reason},)
                   if previous and previous.config_hash == self.cfg.config_hash else ())
        restarts = os.environ.get("SLURM_RESTART_COUNT", "")
        if restarts.isdigit() and int(restarts) > 0 and not (previous and previous.status == "preempted"):
            # Requeued by the scheduler (node failure, scontrol requeue, preemption without a
            # warning signal): the job itself cannot tell which, so the entry names them all.
            history += ({"status": "requeued", "stage": "scheduler",
                         "reason": f"requeued by Slurm (restart {restarts}): node failure, preemption or scontrol requeue"},)
            attempt = max(attempt, int(restarts) + 1)
        try:
            if stages in ("all", "build"):
                self.build()
            ms, forward = [], {}
            if stages == "measure":
                self._load_built()
            if stages in ("all", "measure"):
                with gpu_lock():
                    self.verify()
                    cap = self.capture()
                ms, forward = self.parse(cap)
            status, stage, reason, log = "ok", "", "", ""
            if stages == "build":
                stage, reason = "build", "built only (dry run): not measured"
        except JobFailed as f:
            status, stage, reason, log, ms, forward = f.status, f.stage, f.reason, str(f.log or ""), [], {}
        except SweepError as e:
            status, stage, reason, log, ms, forward = "runtime_failed", "job", str(e), "", [], {}
        self.timings["total"] = time.monotonic() - t0
        result = JobResult(
            sweep=self.cfg.sweep, tag=self.cfg.tag, config_hash=self.cfg.config_hash, macros=self.cfg.macros,
            status=status, stage=stage, reason=reason, log=log, measurements=tuple(ms), forward_ms=forward,
            env=self.env, timings=self.timings, intervals=self.intervals, build=self.build_info, role=self.cfg.role, attempt=attempt,
            history=history, finished_at=_now(),
        )
        if stages == "build" and status == "ok":
            atomic.write_json(self.dir / "built.json", {"config_hash": self.cfg.config_hash, "at": _now(),
                                                        "build": self.build_info, "seconds": self.timings["build"],
                                                        "interval": self.intervals.get("build")})
        else:
            write_result(self.dir, result)
        (self.dir / "state.json").unlink(missing_ok=True)
        return result


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _json_tail(stdout: str) -> dict[str, Any]:
    """The engine's JSON object in a program's output (a profiler may print lines around it)."""
    for m in re.finditer(r'\{\s*"schema"', stdout):
        try:
            obj, _ = json.JSONDecoder().raw_decode(stdout, m.start())
            return obj
        except ValueError:
            continue
    return {}


def _forward_from_stdout(stdout: str) -> dict[str, float]:
    return _json_tail(stdout).get("forward_ms", {})


def _device_from_stdout(stdout: str) -> dict[str, Any]:
    dev = _json_tail(stdout).get("device", {})
    out = {}
    if dev:
        out = {"gpu": dev.get("name", ""), "cuda_driver_api": dev.get("cuda_driver"), "cuda_runtime": dev.get("cuda_runtime")}
    smi = shutil.which("nvidia-smi")
    if smi:
        r = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            name, _, driver = r.stdout.strip().splitlines()[0].partition(",")
            out.setdefault("gpu", name.strip())
            out["driver"] = driver.strip()
    return out


def run_job(job_dir: str | Path, stages: str = "all") -> dict[str, Any]:
    """Entry point for executors: runs the job and returns its result as a dict (picklable)."""
    return Job(Path(job_dir)).run(stages).to_dict()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m sweep.job", description="Run one configuration's job in its folder.")
    ap.add_argument("job_dir", type=Path)
    ap.add_argument("--stages", choices=("all", "build", "measure"), default="all")
    a = ap.parse_args(argv)
    try:
        r = Job(a.job_dir).run(a.stages)
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{r.tag}: {r.status}" + (f" ({r.stage}: {r.reason})" if r.reason else ""))
    return 0 if r.status in ("ok", "skipped") else 1


if __name__ == "__main__":
    sys.exit(main())
