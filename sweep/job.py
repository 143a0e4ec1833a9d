"""One configuration's job on the GPU node: build -> verify -> profile -> result.json.

    python -m sweep.job jobs/<sweep>/<tag>        (what job.sbatch and the executors run)

Every job ends with a result.json written atomically, whatever happened, with
one Status and, for failures, the stage, the reason and the log to read:

    ok              measured
    skipped         illegal configuration (a constraint, or the target's static_assert)
    compile_failed  the build failed for another reason
    verify_failed   the programs built but compute wrong results: never picked
    runtime_failed  a program crashed, or a profiler or tool failed
    timeout         the scheduler's time limit ended it, or a program outlived its own
    preempted       the scheduler took the node back (it is requeued)
    cancelled       somebody cancelled it

While it runs, state.json says where (host, pid, stage, start), so `status`
can show a sweep from its files alone, from any shell. An interrupted job (Ctrl-C)
leaves no result: the next run measures it. The records are in sweep.records.
"""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sweep import atomic, build as build_mod, clocks, profile, sampling
from sweep.errors import DiskFull, SweepError
from sweep.profile import Measurement
from sweep.records import (JobConfig, JobResult, JobSettings, Status, now, read_json, read_result,  # noqa: F401
                           write_result)

# ---------------------------------------------------------------------------
# Running one job
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tools:
    """Where the profilers are: the paths config.json names (--nsys, --ncu), else the
    node's NSYS / NCU environment variables, else PATH."""

    nsys: str | None = None
    ncu: str | None = None

    @classmethod
    def find(cls, settings: JobSettings = JobSettings()) -> "Tools":
        def one(name: str) -> str | None:
            return getattr(settings, name) or os.environ.get(name.upper()) or shutil.which(name)

        return cls(one("nsys"), one("ncu"))

    def path(self, name: str) -> str | None:
        return getattr(self, name, None) or shutil.which(name)


class gpu_lock:
    """Exclusive use of this job's GPU for its measuring stages, when the local executor
    runs a second job per GPU ahead (it names the GPU's lock file): the next job starts
    and the last one's profile is post-processed while this one runs, yet no two jobs
    ever measure on one GPU at once."""

    def __init__(self, path: str | Path | None):
        self.path = path
        self.f = None

    def __enter__(self) -> "gpu_lock":
        if self.path:
            import fcntl

            self.f = open(self.path, "a")
            fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.f is not None:
            import fcntl

            fcntl.flock(self.f, fcntl.LOCK_UN)
            self.f.close()


class Termination:
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


def current_stage(job_dir: Path) -> str:
    """The stage a running job last announced in its state.json ("" when none)."""
    try:
        return str(read_json(Path(job_dir) / "state.json").get("stage", ""))
    except (OSError, SweepError, AttributeError):
        return ""


class JobFailed(Exception):
    def __init__(self, status: Status | str, stage: str, reason: str, log: Path | None = None):
        super().__init__(reason)
        self.status, self.stage, self.reason, self.log = Status(status), stage, reason, log


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


@dataclass(frozen=True, slots=True)
class Ran:
    """A finished program run; its output decoded with replacement (programs may print any bytes)."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def _run(cmd: list[str], log: Path, stage: str, timeout_s: float, env: dict[str, str] | None = None) -> Ran:
    """Runs cmd with its output appended to `log`; classifies crashes, hangs and missing programs."""
    with open(log, "ab") as f:
        f.write(f"\n$ {shlex.join(cmd)}\n".encode())
        f.flush()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout_s,
                               env={**os.environ, **env} if env else None)
        except FileNotFoundError:
            raise JobFailed(Status.RUNTIME_FAILED, stage, f"{cmd[0]} not found on {socket.gethostname()}", log) from None
        except subprocess.TimeoutExpired as e:
            f.write((e.stdout or b"") + (e.stderr or b""))
            raise JobFailed(Status.TIMEOUT, stage, f"{Path(cmd[0]).name} ran past its {timeout_s:.0f} s limit during "
                                                   f"{stage}; raise it (--time, or slurm.time_min)", log) from None
        f.write(p.stdout)
        f.write(p.stderr)
    ran = Ran(list(cmd), p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))
    if p.returncode < 0:
        sig = signal.Signals(-p.returncode).name if -p.returncode in signal.Signals._value2member_map_ else str(-p.returncode)
        if Termination.requested:
            raise JobFailed(Status.CANCELLED, stage, f"cancelled during {stage}: the scheduler terminated the job", log)
        raise JobFailed(Status.RUNTIME_FAILED, stage, f"{Path(cmd[0]).name} was killed by {sig}", log)
    return ran


def last_line(text: str) -> str:
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


class Job:
    """The stages of one job; each raises JobFailed to end it with a status."""

    def __init__(self, job_dir: Path, tools: Tools | None = None, timeout_s: float | None = None,
                 build_jobs: int | None = None, gpu_lock_path: str | Path | None = None):
        self.dir = Path(job_dir).resolve()
        self.cfg = JobConfig.load(self.dir)
        settings = self.cfg.settings
        self.tools = tools or Tools.find(settings)
        self.timeout_s = timeout_s if timeout_s is not None else settings.timeout_s
        self.build_jobs = build_jobs if build_jobs is not None else (self.cfg.build.get("jobs", 0) or settings.build_jobs)
        self.gpu_lock_path = gpu_lock_path
        self.timings: dict[str, float] = {}
        self.intervals: dict[str, list[float]] = {}
        self.build_info: dict[str, Any] = {}
        self.env: dict[str, Any] = {"host": socket.gethostname(), "commit": self.cfg.commit,
                                    "backend": self.cfg.profile["backend"]}
        self.sampled: sampling.Sampled | None = None

    # -- helpers ---------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        r = self.cfg.run
        return {**self.cfg.values, "build": str(self.dir / "build"), "job": str(self.dir), "batch": r["batch"],
                "seq_len": r["seq_len"], "iterations": r["iterations"], "warmup": r["warmup"],
                "events_json": str(self.dir / "events.json")}

    def program(self, extra: tuple[str, ...] | list[str] = (), iterations: int | None = None) -> list[str]:
        values = self.values()
        if iterations is not None:
            values["iterations"] = iterations
        return expand(list(self.cfg.target["profile"]) + list(extra), values, list(self.cfg.run["args"]))

    def mark(self, stage: str, start: float) -> None:
        """Record a stage's wall-clock interval (epoch seconds), for overhead accounting."""
        self.intervals[stage] = [start, time.time()]

    def state(self, stage: str) -> None:
        atomic.write_json(self.dir / "state.json", {"stage": stage, "host": socket.gethostname(), "pid": os.getpid(),
                                                     "started": now(), "slurm_job": slurm_job_id()})

    # -- stages ----------------------------------------------------------------
    def build(self) -> None:
        self.state("build")
        t0 = time.monotonic()
        arch = self.cfg.settings.arch or build_mod.resolve_arch(self.cfg.build["arch"])
        start = time.time()
        out = build_mod.build(self.dir, arch, self.build_jobs, self.timeout_s)
        self.timings["build"] = time.monotonic() - t0
        self.mark("build", start)
        self.build_info = {"arch": arch, "compiled": list(out.compiled), "cached": list(out.cached)}
        if not out.ok:
            raise JobFailed(out.status, "build", out.reason, out.log)
        self.build_info["objects"] = build_mod.object_digests(self.dir / "build")
        self._check_programs(out.log)

    def _check_programs(self, log: Path) -> None:
        """Every program the job will run must exist once the build is done: a typo in a
        command or a Makefile whose `all` misses one fails here, before any GPU time."""
        commands = [list(c) for c in self.cfg.target["verify"]] + [list(self.cfg.target["profile"])]
        for cmd in commands:
            program = expand(cmd[:1], self.values(), [])[0] if cmd else ""
            if program.startswith(str(self.dir)) and not os.access(program, os.X_OK):
                raise JobFailed(Status.COMPILE_FAILED, "build",
                                f"the build made no program {program}: make the Makefile's `all` target build it, "
                                "or fix the command in the space file's target", log)

    def _load_built(self) -> None:
        """Build facts from a separate build stage (the local executor builds on CPUs first)."""
        try:
            built = read_json(self.dir / "built.json")
        except (OSError, SweepError):
            raise JobFailed(Status.RUNTIME_FAILED, "build", "measure stage without a build: built.json is missing") from None
        if not isinstance(built, dict) or built.get("config_hash") != self.cfg.config_hash:
            raise JobFailed(Status.RUNTIME_FAILED, "build", "built.json belongs to another configuration: build again")
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
                raise JobFailed(Status.VERIFY_FAILED, "verify",
                                f"{Path(cmd[0]).name} exit {p.returncode}: {last_line(p.stderr) or last_line(p.stdout)}", log)
        self.timings["verify"] = time.monotonic() - t0
        self.mark("verify", start)

    def capture(self) -> sampling.Taken:
        """Run the timing program under the backend as often as the plan says (needs the GPU; see sweep.sampling)."""
        self.state("profile")
        be = profile.backend(self.cfg.profile["backend"])
        log = self.dir / "profile.log"
        log.write_text("")
        t0, start = time.monotonic(), time.time()
        tool = ""
        if be.tool:
            tool = self.tools.path(be.tool) or ""
            if not tool:
                raise JobFailed(Status.RUNTIME_FAILED, "profile",
                                f"{be.tool} not found on {socket.gethostname()}: set {be.tool.upper()}=/path/to/{be.tool} "
                                f"(or --{be.tool}) or load its module (slurm.setup), or use profile.backend: events")
        request = profile.Request(self.dir, self.program, tool, self.cfg.profile, tuple(self.cfg.target["events"]))
        try:
            inv = be.invocation(request)
        except SweepError as e:
            raise JobFailed(Status.RUNTIME_FAILED, "profile", str(e), log) from None
        reader = clocks.reader()
        facts = clocks.fingerprint(reader)
        self.env.update(facts)
        plan = sampling.Plan.of(self.cfg.run, self.cfg.profile, inv.iterations)
        self.sampler = sampling.Sampler(plan, lambda: self._capture_once(inv, log),
                                        lambda ran: self._parse_once(be, inv, ran, log), reader=reader, facts=facts)
        taken = self.sampler.take()
        self.timings["profile"] = time.monotonic() - t0
        self.mark("profile", start)
        return taken

    def _capture_once(self, inv: profile.Invocation, log: Path) -> Ran:
        inv.output.unlink(missing_ok=True)
        p = _run(inv.command, log, "profile", self.timeout_s, env=dict(inv.env))
        self._check(p, log)
        return p

    def _parse_once(self, be: profile.Backend, inv: profile.Invocation, ran: Ran, log: Path) -> list[Measurement]:
        for cmd in inv.post:
            self._check(_run(list(cmd), log, "parse", self.timeout_s), log, "parse")
        try:
            parsed = be.parse(inv, ran.stdout)
        except SweepError as e:
            raise JobFailed(Status.RUNTIME_FAILED, "parse", str(e), log) from None
        self.parsed = parsed
        return parsed.measurements

    def parse(self, taken: sampling.Taken) -> tuple[list[Measurement], dict[str, float]]:
        """Turn the runs into Measurements (a single run's parse is CPU only: it runs outside the GPU lock)."""
        t1, start = time.monotonic(), time.time()
        ms, self.sampled = self.sampler.finish(taken)
        self.timings["parse"] = time.monotonic() - t1
        self.mark("parse", start)
        if not ms:
            raise JobFailed(Status.RUNTIME_FAILED, "parse", "the profile holds no kernel launches in the timed iterations",
                            self.dir / "profile.log")
        self.env.update(_device_facts(self.parsed.device_text))
        return ms, self.parsed.forward_ms

    def _check(self, p: Ran, log: Path, stage: str = "profile") -> None:
        if p.returncode != 0:
            raise JobFailed(Status.RUNTIME_FAILED, stage,
                            f"{Path(p.args[0]).name} exit {p.returncode}: {last_line(p.stderr) or last_line(p.stdout)}", log)

    # -- the whole job -----------------------------------------------------------
    def run(self, stages: str = "all") -> JobResult:
        """stages: all | build (compile only: --dry-run) | measure (after a separate build).

        An interrupt (Ctrl-C, SIGINT) is not a result: the job leaves none, so the
        next run measures it, and the interrupt goes on to the caller."""
        t0 = time.monotonic()
        previous = read_result(self.dir)
        history: tuple[dict[str, str], ...] = ()
        restarts = os.environ.get("SLURM_RESTART_COUNT", "")
        if restarts.isdigit() and int(restarts) > 0 and not (previous and previous.status == Status.PREEMPTED):
            # Requeued by the scheduler (node failure, scontrol requeue, preemption without a
            # warning signal): the job itself cannot tell which, so the entry names them all.
            history = ({"status": "requeued", "stage": "scheduler",
                        "reason": f"requeued by Slurm (restart {restarts}): node failure, preemption or scontrol requeue"},)
        ms: list[Measurement] = []
        forward: dict[str, float] = {}
        if self.cfg.role == "race":     # the certification race (sweep.race) runs as a job of its own
            from sweep import race

            return race.run_job(self, stages, previous)
        try:
            if stages in ("all", "build"):
                self.build()
            if stages == "measure":
                self._load_built()
            if stages in ("all", "measure"):
                with gpu_lock(self.gpu_lock_path):
                    self.verify()
                    taken = self.capture()
                ms, forward = self.parse(taken)
            status, stage, reason, log = Status.OK, "", "", ""
            if stages == "build":
                stage, reason = "build", "built only (dry run): not measured"
        except JobFailed as f:
            status, stage, reason, log, ms, forward = f.status, f.stage, f.reason, str(f.log or ""), [], {}
        except (DiskFull, build_mod.BuildInterrupted):
            (self.dir / "state.json").unlink(missing_ok=True)
            raise
        except OSError as e:
            (self.dir / "state.json").unlink(missing_ok=True)
            if e.errno == errno.ENOSPC:
                raise DiskFull.at(self.dir) from None
            raise
        except SweepError as e:
            status, stage, reason, log, ms, forward = Status.RUNTIME_FAILED, "job", str(e), "", [], {}
        except BaseException:
            (self.dir / "state.json").unlink(missing_ok=True)
            raise
        self.timings["total"] = time.monotonic() - t0
        result = JobResult.ended(self.cfg, status, stage, reason, log, previous=previous, measurements=tuple(ms),
                                 forward_ms=forward, env=self.env, timings=self.timings, intervals=self.intervals,
                                 build=self.build_info, sampling=self.sampled if status == Status.OK else None)
        if history:
            result = replace(result, history=result.history + history, attempt=max(result.attempt, int(restarts) + 1))
        if stages == "build" and status == Status.OK:
            atomic.write_json(self.dir / "built.json", {"config_hash": self.cfg.config_hash, "at": now(),
                                                        "build": self.build_info, "seconds": self.timings["build"],
                                                        "interval": self.intervals.get("build")})
        else:
            write_result(self.dir, result)
        (self.dir / "state.json").unlink(missing_ok=True)
        return result


def _device_facts(text: str) -> dict[str, Any]:
    """GPU, driver and CUDA versions: from the program's JSON when it prints one, and nvidia-smi."""
    dev = profile.json_tail(text).get("device", {})
    out = {}
    if isinstance(dev, dict) and dev:
        out = {"gpu": dev.get("name", ""), "cuda_driver_api": dev.get("cuda_driver"), "cuda_runtime": dev.get("cuda_runtime")}
    smi = shutil.which("nvidia-smi")
    if smi:
        r = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            name, _, driver = r.stdout.strip().splitlines()[0].partition(",")
            out.setdefault("gpu", name.strip())
            out["driver"] = driver.strip()
    return out


def run_job(job_dir: str | Path, stages: str = "all", *, build_jobs: int | None = None,
            gpu_lock_path: str | None = None) -> dict[str, Any]:
    """Entry point for executors: runs the job and returns its result as a dict (picklable)."""
    return Job(Path(job_dir), build_jobs=build_jobs, gpu_lock_path=gpu_lock_path).run(stages).to_dict()


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
    return 0 if r.status in (Status.OK, Status.SKIPPED) else 1


if __name__ == "__main__":
    sys.exit(main())
