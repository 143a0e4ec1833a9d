"""What the driver asks the Slurm scheduler, and how often (STATS).

One `squeue -h -r -o '%i|%T|%r'` answers everything a poll needs: every task of
the user still in the queue (one line per array task), its state, and for a
pending task the reason Slurm gives (Priority, Resources, JobArrayTaskLimit,
Dependency, DependencyNeverSatisfied, QOSMaxJobsPerUserLimit, ...). The user's
whole queue is read, not only the sweep's arrays, because a submit limit counts
every task of the user. A task has ended when it has left the queue; what it
ended as comes from its result.json, else from `scontrol show job` (Slurm keeps
a finished job for MinJobAge), else sacct where an accounting database answers.
"""

from __future__ import annotations

import getpass
import pickle
import re
import shutil
import json
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from sweep.core.errors import SweepError
from sweep.dispatch import PendingJob, record_lost
from sweep.records import JobConfig, JobResult, Status, read_result, write_result

NEVER = "DependencyNeverSatisfied"   # a dependent task whose dependency failed: it would pend forever
THROTTLED = "JobArrayTaskLimit"      # a task held back by its array's throttle (%N)
LIVE_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD",
               "REQUEUE_FED", "SPECIAL_EXIT", "STOPPED", "SIGNALING", "STAGE_OUT"}
STATE_TO_STATUS = {"TIMEOUT": Status.TIMEOUT, "CANCELLED": Status.CANCELLED, "PREEMPTED": Status.PREEMPTED,
                   "NODE_FAIL": Status.RUNTIME_FAILED, "OUT_OF_MEMORY": Status.RUNTIME_FAILED,
                   "FAILED": Status.RUNTIME_FAILED, "BOOT_FAIL": Status.RUNTIME_FAILED, "DEADLINE": Status.TIMEOUT,
                   "COMPLETED": Status.RUNTIME_FAILED}


@dataclass
class SchedulerStats:
    """How often the driver asked the scheduler (reported after a run)."""

    squeue_calls: int = 0
    scontrol_calls: int = 0
    sacct_calls: int = 0
    submissions: int = 0
    scancel_calls: int = 0


STATS = SchedulerStats()


@dataclass(frozen=True, slots=True)
class Queued:
    """A task in the queue: its state and, while pending, why (squeue's %r)."""

    state: str
    reason: str = ""


def run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(cmd, 1, "", str(e))


def parse_squeue(text: str) -> dict[str, Queued]:
    """'ARRAY_TASK' (or 'JOB') -> Queued, from `squeue -h -r -o '%i|%T|%r'`."""
    out = {}
    for line in text.splitlines():
        jid, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if jid:
            out[jid] = Queued(state.split()[0] if state.strip() else "", reason.strip())
    return out


def queue(array_ids: list[str] | None = None, user: str | None = None) -> dict[str, Queued]:
    """Every task in the queue of these arrays, or of the user (default: this user), in one squeue call."""
    if array_ids is not None and not array_ids:
        return {}
    STATS.squeue_calls += 1
    which = ["-j", ",".join(array_ids)] if array_ids else ["-u", user or getpass.getuser()]
    r = run(["squeue", "-h", "-r", *which, "-o", "%i|%T|%r"])
    if r.returncode != 0:
        if "Invalid job id" in r.stderr:  # every listed array has left the queue
            return {}
        raise SweepError(f"squeue failed: {r.stderr.strip() or r.stdout.strip()}; is the Slurm controller reachable?")
    return parse_squeue(r.stdout)


def final_state(job_id: str) -> str:
    """A finished task's state: scontrol while Slurm remembers it (MinJobAge), else sacct when it has data."""
    STATS.scontrol_calls += 1
    r = run(["scontrol", "show", "job", job_id])
    m = re.search(r"JobState=(\S+)", r.stdout)
    if r.returncode == 0 and m:
        return m.group(1)
    if shutil.which("sacct"):
        STATS.sacct_calls += 1
        r = run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State"])
        lines = [l.split()[0] for l in r.stdout.splitlines() if l.strip()]
        if r.returncode == 0 and lines:
            return lines[-1]
    return "UNKNOWN"


def submitit_outcome(folder: Path, job_id: str) -> str:
    """submitit's result file for a task: 'timed-out' and similar reasons, when it wrote one."""
    try:
        with open(folder / f"{job_id}_0_result.pkl", "rb") as f:
            outcome, value = pickle.load(f)
        return f"{outcome}: {value}"[:300]
    except Exception:  # absent or unreadable: nothing to add
        return ""


def cancel(job_ids: list[str]) -> None:
    """scancel these tasks (one call); one that has already ended is no error."""
    if job_ids:
        STATS.scancel_calls += 1
        run(["scancel", *job_ids])


def set_throttle(array_id: str, throttle: int) -> bool:
    """Let `throttle` tasks of an array run at once (scontrol update ... ArrayTaskThrottle)."""
    STATS.scontrol_calls += 1
    return run(["scontrol", "update", f"JobId={array_id}", f"ArrayTaskThrottle={throttle}"]).returncode == 0


# ---------------------------------------------------------------------------
# What an ended task ended as
# ---------------------------------------------------------------------------


def built(job: PendingJob) -> bool:
    """Whether the folder holds a build of this configuration newer than any result of it."""
    try:
        built = json.loads((job.dir / "built.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(built, dict) or built.get("config_hash") != job.config_hash:
        return False
    r = read_result(job.dir)
    if r is None or r.config_hash != job.config_hash:
        return True
    return (job.dir / "built.json").stat().st_mtime >= (job.dir / "result.json").stat().st_mtime


def build_record(j: PendingJob) -> JobResult:
    """What the build of a configuration whose measure task can never start left: its failure, or
    a record saying it left none."""
    r = read_result(j.dir)
    if r is not None and r.config_hash == j.config_hash and r.status != Status.OK:
        return r
    return record_lost(j, "its build task ended without a result", status=Status.RUNTIME_FAILED, stage="build")


def finished(j: PendingJob, job_id: str, folder: Path, stages: str) -> JobResult:
    """The result of a task that has left the queue: its own record, else the scheduler's verdict."""
    log = folder / f"{job_id}_0_log.out"  # submitit's name for task 0 of job (or array task) job_id
    if stages == "build" and built(j):  # a build records its success in built.json, not result.json
        return JobResult.ended(JobConfig.load(j.dir), Status.OK, "build", "built only (dry run): not measured", log)
    r = read_result(j.dir)
    if r is not None and r.config_hash == j.config_hash and r.status == Status.CANCELLED:
        # the job only knows it was terminated; the scheduler knows why
        state = final_state(job_id).split()[0].rstrip("+")
        if state in ("TIMEOUT", "DEADLINE"):
            r = replace(r, status=Status.TIMEOUT, reason=f"hit the Slurm time limit during {r.stage}; raise --time")
        elif state == "NODE_FAIL":
            r = replace(r, status=Status.RUNTIME_FAILED, reason=f"its node failed (NODE_FAIL) during {r.stage}")
        elif state == "PREEMPTED":
            r = replace(r, status=Status.PREEMPTED, reason=f"preempted during {r.stage} and not requeued")
        write_result(j.dir, r)
        return r
    if r is not None and r.config_hash == j.config_hash and r.status != Status.PREEMPTED:
        return r
    state = final_state(job_id).split()[0].rstrip("+")
    status = STATE_TO_STATUS.get(state, Status.RUNTIME_FAILED)
    reason = {Status.TIMEOUT: "hit the Slurm time limit before writing a result; raise --time",
              Status.CANCELLED: "cancelled (scancel, or an administrator)",
              Status.PREEMPTED: "preempted and not requeued"}.get(status, f"the job ended as {state} without a result")
    if state == "NODE_FAIL":
        reason = "its node failed (NODE_FAIL)"
    outcome = submitit_outcome(folder, job_id)
    if "timed-out" in outcome and status != Status.CANCELLED:
        status, reason = Status.TIMEOUT, "hit the Slurm time limit; raise --time"
    return record_lost(j, reason, log, status=status, stage="scheduler")
