"""Running a job's programs: where the profilers are, the GPU lock, the scheduler's
termination, command templates, and one subprocess wrapper that classifies a run.

    Tools        nsys / ncu paths: config.json, then $NSYS / $NCU, then PATH
    gpu_lock     exclusive use of one GPU while a job measures (sweep.node.gpus: one lock per GPU per node)
    Termination  set when the scheduler's SIGTERM arrives: a program killed by it was cancelled
    expand       fills a command template's {placeholders} and {args}
    run_program  runs a command with its output appended to a log, in a process group of its own
                 (sweep.node.group); a crash (signal), a hang (the job's deadline) and a missing
                 program become JobFailed with their status; a child left behind is killed
    JobFailed    ends a job with a status, a stage, a reason and the log to read

sweep.node.job strings these into the stages of one job.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep import profile
from sweep.core import safe
from sweep.node import group
from sweep.core.errors import SweepError
from sweep.node.gpus import gpu_lock  # noqa: F401  (importable from here, as before)
from sweep.records import JobSettings, Status, read_json


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


def run_program(cmd: list[str], log: Path, stage: str, timeout_s: float, env: dict[str, str] | None = None) -> Ran:
    """Runs cmd with its output appended to `log`; classifies crashes, hangs and missing programs.
    It runs in a process group of its own, within the job's own deadline (sweep.node.group): past
    it the whole group is killed and the job ends `timeout` with the stage. A process it leaves
    holding its output is killed LINGER_S after it exits; its own exit code and output stand."""
    left = group.remaining()
    limit = timeout_s if left is None else min(timeout_s, left)
    with safe.open_nofollow(log, "ab") as f:
        f.write(f"\n$ {shlex.join(cmd)}\n".encode())
        f.flush()
        try:
            p = group.run_group(cmd, limit, env={**os.environ, **env} if env else None,
                                stop=lambda: Termination.requested)
        except FileNotFoundError:
            raise JobFailed(Status.RUNTIME_FAILED, stage, f"{cmd[0]} not found on {socket.gethostname()}", log) from None
        f.write(p.stdout)
        f.write(p.stderr)
        if p.why == "lingering":   # its own exit code and output stand: a helper (a profiler's) may do this
            f.write(f"\n# {Path(cmd[0]).name} exited, but a process it started still held its output "
                    f"{group.LINGER_S:.0f} s later: that process group was killed\n".encode())
    name = Path(cmd[0]).name
    # Slurm sends its warning (USR2) to every process of the job, the program too: one killed by it,
    # or by anything once the deadline expired, ended at the time limit, not of a fault of its own
    if p.why == "deadline" or (p.returncode < 0 and group.expired()):
        raise JobFailed(Status.TIMEOUT, stage, f"{name} ran past its {limit:.0f} s limit during {stage} (the job's "
                                               "time limit left); its process group was killed; raise it (--time, "
                                               "or slurm.time_min)", log)
    ran = Ran(list(cmd), p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))
    if p.returncode < 0:
        sig = signal.Signals(-p.returncode).name if -p.returncode in signal.Signals._value2member_map_ else str(-p.returncode)
        if Termination.requested:
            raise JobFailed(Status.CANCELLED, stage, f"cancelled during {stage}: the scheduler terminated the job", log)
        raise JobFailed(Status.RUNTIME_FAILED, stage, f"{name} was killed by {sig}", log)
    return ran


def last_line(text: str) -> str:
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


def tail(p: Ran) -> str:
    """What a failed run said last (stderr, else stdout): the reason a record gives."""
    return last_line(p.stderr) or last_line(p.stdout)


def check_exit(p: Ran, log: Path, stage: str = "profile") -> None:
    """A non-zero exit ends the job as runtime_failed, with the program's last words."""
    if p.returncode != 0:
        raise JobFailed(Status.RUNTIME_FAILED, stage, f"{Path(p.args[0]).name} exit {p.returncode}: {tail(p)}", log)


def device_facts(text: str) -> dict[str, Any]:
    """GPU, driver and CUDA versions: from the program's JSON when it prints one, and nvidia-smi."""
    dev = profile.json_tail(text).get("device", {})
    out = {}
    if isinstance(dev, dict) and dev:
        out = {"gpu": dev.get("name", ""), "cuda_driver_api": dev.get("cuda_driver"), "cuda_runtime": dev.get("cuda_runtime")}
        if dev.get("uuid"):   # which GPU of its model, where the program says (else the clocks' reading stands)
            out["gpu_uuid"] = str(dev["uuid"])
    smi = shutil.which("nvidia-smi")
    if smi:
        r = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            name, _, driver = r.stdout.strip().splitlines()[0].partition(",")
            out.setdefault("gpu", name.strip())
            out["driver"] = driver.strip()
    return out
