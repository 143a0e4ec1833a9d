"""Slurm, through submitit: one job array per batch, watched sparingly, resumable.

Submission: the batch's job folders go to `SlurmExecutor.map_array` in one call
(one sbatch, one array, `--array=0-N%P` with P = slurm.array_parallelism). The
array's sbatch script is copied into every job folder (slurm_array.sbatch) and
the submission is recorded in jobs/<sweep>/_dispatch/slurm.json.

Watching: one `squeue -r -j <arrays>` per poll interval for every array of the
sweep, never one call per job; a task has finished when it has left the queue.
Its result.json is then the truth. A task that left no result is classified
from the scheduler (`scontrol show job`, which remembers a job for MinJobAge;
sacct when an accounting database answers) and submitit's own outcome file:
timeout, cancelled, node failure (runtime_failed), preempted.

Faults inside the job (see SweepTask): Slurm sends USR2 shortly before the time
limit and on preemption (submitit's --signal). At the time limit the task
records a timeout result itself (with the stage it was in) and is not requeued:
it would only time out again. On preemption it records the interrupted attempt
and asks submitit to requeue it; the next attempt starts over (builds come from
the object cache).

Resume: a driver started again reads slurm.json, asks squeue which recorded
tasks are still queued or running, and watches those instead of submitting them
again; the rest go out as a new array.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sweep import atomic
from sweep.errors import SweepError
from sweep.executors import Context, Executor, OnResult, PendingJob, job_environment, record_lost
from sweep.job import Termination, current_stage, run_job, slurm_job_id
from sweep.progress import Progress
from sweep.records import JobConfig, JobResult, Status, now, read_result, write_result
from sweep.space import Slurm

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


STATS = SchedulerStats()


# ---------------------------------------------------------------------------
# The task a Slurm job runs
# ---------------------------------------------------------------------------


class SweepTask:
    """run_job, made checkpointable for submitit: records timeouts, requeues on preemption."""

    def __init__(self, time_min: int):
        self.time_min = time_min
        self.started = time.time()

    def __call__(self, job_dir: str, stages: str) -> dict[str, Any]:
        self.started = time.time()
        Termination.watch()
        return run_job(job_dir, stages)

    def timed_out(self) -> bool:
        # submitit's own rule (SignalHandler.has_timed_out): past the guaranteed walltime
        limit = self.time_min * 60
        return time.time() - self.started >= min(limit * 0.8, limit - 10 * 60) if limit > 0 else False

    def checkpoint(self, job_dir: str, stages: str):
        import submitit

        d = Path(job_dir)
        cfg = JobConfig.load(d)
        stage = current_stage(d) or "job"
        where = "the job" if stage == "job" else stage
        previous, log = read_result(d), _task_log(d)
        if self.timed_out():
            write_result(d, JobResult.ended(cfg, Status.TIMEOUT, stage, f"hit the {self.time_min}-minute time limit "
                                            f"during {where}; raise it (--time or slurm.time_min)", log, previous=previous))
            (d / "state.json").unlink(missing_ok=True)
            return None  # no requeue: it would time out again
        write_result(d, JobResult.ended(cfg, Status.PREEMPTED, stage,
                                        f"preempted on {socket.gethostname()} during {where}; requeued", log,
                                        previous=previous))
        return submitit.helpers.DelayedSubmission(SweepTask(self.time_min), job_dir, stages)


def _task_log(job_dir: Path) -> str:
    folder, job_id = os.environ.get("SWEEP_SLURM_LOG_DIR", ""), slurm_job_id()
    return str(Path(folder) / f"{job_id}_0_log.out") if folder and job_id else ""


# ---------------------------------------------------------------------------
# Scheduler queries
# ---------------------------------------------------------------------------


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(cmd, 1, "", str(e))


def queue_states(array_ids: list[str]) -> dict[str, str]:
    """'ARRAY_TASK' -> state for every task of these arrays still in the queue (one squeue call)."""
    if not array_ids:
        return {}
    STATS.squeue_calls += 1
    r = _run(["squeue", "-h", "-r", "-j", ",".join(array_ids), "-o", "%i|%T"])
    out = {}
    if r.returncode != 0:
        if "Invalid job id" in r.stderr:  # every listed array has left the queue
            return {}
        raise SweepError(f"squeue failed: {r.stderr.strip() or r.stdout.strip()}; is the Slurm controller reachable?")
    for line in r.stdout.splitlines():
        jid, _, state = line.strip().partition("|")
        if jid:
            out[jid] = state.split()[0] if state else ""
    return out


def final_state(job_id: str) -> str:
    """A finished task's state: scontrol while Slurm remembers it (MinJobAge), else sacct when it has data."""
    STATS.scontrol_calls += 1
    r = _run(["scontrol", "show", "job", job_id])
    m = re.search(r"JobState=(\S+)", r.stdout)
    if r.returncode == 0 and m:
        return m.group(1)
    if shutil.which("sacct"):
        STATS.sacct_calls += 1
        r = _run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State"])
        lines = [l.split()[0] for l in r.stdout.splitlines() if l.strip()]
        if r.returncode == 0 and lines:
            return lines[-1]
    return "UNKNOWN"


def _submitit_outcome(folder: Path, job_id: str) -> str:
    """submitit's result file for a task: 'timed-out' and similar reasons, when it wrote one."""
    try:
        import pickle

        with open(folder / f"{job_id}_0_result.pkl", "rb") as f:
            outcome, value = pickle.load(f)
        return f"{outcome}: {value}"[:300]
    except Exception:  # absent or unreadable: nothing to add
        return ""


# ---------------------------------------------------------------------------
# Submission and watching
# ---------------------------------------------------------------------------


def executor_parameters(s: Slurm, sweep: str) -> dict[str, Any]:
    """submitit SlurmExecutor parameters for the space's (and command line's) Slurm settings."""
    params: dict[str, Any] = {
        "job_name": f"sweep-{sweep}", "time": s.time_min, "cpus_per_task": s.cpus_per_job,
        "array_parallelism": s.array_parallelism, "stderr_to_stdout": True,
        # USR2 must come before the limit, even for a 1-minute test job
        "signal_delay_s": int(min(90, max(15, s.time_min * 60 // 4))),
    }
    if s.gpus_per_job:
        params["gpus_per_node"] = s.gpus_per_job
    for key in ("partition", "account", "qos", "constraint", "mem"):
        v = getattr(s, key)
        if v:
            params[key] = _sbatch_value(key, v)
    extra: dict[str, Any] = {}
    for opt in s.extra_sbatch:
        m = re.fullmatch(r"--([A-Za-z][A-Za-z0-9_-]*)(?:=(.*))?", opt.strip())
        if not m:
            raise SweepError(f"slurm extra option {opt!r} must look like --name or --name=value (an sbatch option)")
        extra[m.group(1).replace("_", "-")] = _sbatch_value(opt, m.group(2)) if m.group(2) is not None else True
    if extra:
        params["additional_parameters"] = extra
    if s.setup:
        params["setup"] = list(s.setup)
    return params


def _sbatch_value(key: str, value: str) -> str:
    # Each option becomes one '#SBATCH --key=value' line: a line break would end it and
    # start a line sbatch ignores or reads as another option, whitespace would cut it.
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise SweepError(f"slurm {key} {value!r} contains whitespace or a control character, which an #SBATCH line "
                         "cannot carry; give it without spaces or line breaks (e.g. --constraint='h100&ib')")
    return value


def log_folder(sweep_dir: Path, s: Slurm) -> Path:
    return Path(s.log_dir).expanduser().resolve() if s.log_dir else Path(sweep_dir) / "_slurm"


def _records_path(sweep_dir: Path) -> Path:
    return Path(sweep_dir) / "_dispatch" / "slurm.json"


def load_records(sweep_dir: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(_records_path(sweep_dir).read_text())
    except (OSError, ValueError):
        return []


def submit(jobs: list[PendingJob], stages: str, sweep_dir: Path, s: Slurm, sweep: str) -> dict[str, Any]:
    """One sbatch for the whole batch; returns (and records) the submission."""
    import submitit

    folder = log_folder(sweep_dir, s)
    ex = submitit.SlurmExecutor(folder=str(folder), max_num_timeout=0)
    params = executor_parameters(s, sweep)
    params.setdefault("setup", [])
    params["setup"] = [f"export SWEEP_SLURM_LOG_DIR={folder}",
                       *(f"export {k}={v}" for k, v in job_environment().items())] + params["setup"]
    try:
        ex.update_parameters(**params)
    except ValueError as e:
        raise SweepError(f"Slurm settings rejected: {e}") from None
    task = SweepTask(s.time_min)
    try:
        sjobs = ex.map_array(task, [str(j.dir) for j in jobs], [stages] * len(jobs))
    except Exception as e:  # sbatch refused: say why, in one line
        msg = str(e).strip().splitlines()
        raise SweepError(f"sbatch refused the array: {msg[-1] if msg else e}; check partition/account/qos/gres "
                         f"(`sinfo`), or the options in the space file's slurm: section") from None
    STATS.submissions += 1
    array_id = sjobs[0].job_id.split("_")[0]
    script = folder / f"{array_id}_submission.sh"
    for i, j in enumerate(jobs):
        if script.is_file():
            text = script.read_text()
            atomic.write_text(j.dir / "slurm_array.sbatch",
                              f"# array {array_id}, task {i} of {len(jobs)} (this folder); the script every task ran:\n{text}")
    record = {"array_id": array_id, "job_ids": [sj.job_id for sj in sjobs],  # "A_i", or "A" for a lone job
              "tags": [j.tag for j in jobs], "dirs": [str(j.dir) for j in jobs],
              "hashes": [j.config_hash for j in jobs], "stages": stages, "submitted_at": now(), "log_dir": str(folder)}
    records = load_records(sweep_dir) + [record]
    atomic.write_json(_records_path(sweep_dir), records)
    return record


class SlurmExecutor(Executor):
    name = "slurm"
    doc = "one job array per batch (one sbatch), watched with one squeue per interval"

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.watching: dict[str, tuple[PendingJob, str, str]] = {}   # job id "A_i" -> (job, log folder, stages)

    @classmethod
    def preflight(cls, space, dry_run: bool) -> None:
        executor_parameters(space.slurm, space.name)  # refuses what an #SBATCH line cannot carry, before rendering
        if not shutil.which("sbatch"):
            raise SweepError("sbatch not found: --executor slurm runs on a Slurm login node; use --executor local on a GPU machine")

    def parallelism(self) -> int:
        return self.ctx.space.slurm.array_parallelism

    def submit(self, jobs: list[PendingJob], stages: str, progress: Progress | None = None) -> None:
        """Submit what is not already queued (tasks a previous driver submitted are watched, not resubmitted)."""
        ctx, s = self.ctx, self.ctx.space.slurm
        say = progress.note if progress is not None else (lambda text: None)
        records = load_records(ctx.sweep_dir)
        live = queue_states([r["array_id"] for r in records])
        by_dir = {str(j.dir): j for j in jobs}
        attached: set[str] = set()
        for r in records:
            for i, (d, h) in enumerate(zip(r["dirs"], r["hashes"])):
                jid = r.get("job_ids", [])[i] if r.get("job_ids") else f"{r['array_id']}_{i}"
                if d in by_dir and by_dir[d].config_hash == h and live.get(jid) in LIVE_STATES and d not in attached:
                    self.watching[jid] = (by_dir[d], r["log_dir"], r["stages"])
                    attached.add(d)
        fresh = [j for j in jobs if str(j.dir) not in attached]
        if attached:
            say(f"  {len(attached)} job(s) still queued from an earlier run: watching them, not resubmitting")
        if fresh:
            rec = submit(fresh, stages, ctx.sweep_dir, s, ctx.space.name)
            for jid, j in zip(rec["job_ids"], fresh):
                self.watching[jid] = (j, rec["log_dir"], stages)
            say(f"  submitted job array {rec['array_id']} ({len(fresh)} tasks, at most {s.array_parallelism} at once)")

    def run(self, jobs: list[PendingJob], stages: str, on_result: OnResult, progress: Progress) -> None:
        if jobs:
            self.submit(jobs, stages, progress)
            self.watch(on_result, progress)

    def watch(self, on_result: OnResult, progress: Progress) -> None:
        """Watch every task until it has left the queue."""
        poll_s = max(self.ctx.poll_s, 5.0)
        arrays = sorted({jid.split("_")[0] for jid in self.watching})
        while self.watching:
            states = queue_states(arrays)
            running = sum(1 for jid in self.watching if states.get(jid) not in (None, "PENDING"))
            for jid, (j, folder, st) in list(self.watching.items()):
                if jid in states:
                    continue
                del self.watching[jid]
                on_result(_finished(j, jid, Path(folder), st))
            progress.show(running=running)
            if self.watching:
                time.sleep(poll_s)

    def cancel(self) -> None:
        """The driver's interrupt leaves the array running: its tasks write their own
        results, and the next driver watches them (resume). Nothing is cancelled."""


def _finished(j: PendingJob, job_id: str, folder: Path, stages: str) -> JobResult:
    """The result of a task that has left the queue: its own record, else the scheduler's verdict."""
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
    log = folder / f"{job_id}_0_log.out"  # submitit's name for task 0 of job (or array task) job_id
    if stages == "build":  # a dry run records a successful build in built.json, not result.json
        try:
            built = json.loads((j.dir / "built.json").read_text())
            if built.get("config_hash") == j.config_hash:
                return JobResult.ended(JobConfig.load(j.dir), Status.OK, "build", "built only (dry run): not measured", log)
        except (OSError, ValueError):
            pass
    state = final_state(job_id).split()[0].rstrip("+")
    status = STATE_TO_STATUS.get(state, Status.RUNTIME_FAILED)
    reason = {Status.TIMEOUT: "hit the Slurm time limit before writing a result; raise --time",
              Status.CANCELLED: "cancelled (scancel, or an administrator)",
              Status.PREEMPTED: "preempted and not requeued"}.get(status, f"the job ended as {state} without a result")
    if state == "NODE_FAIL":
        reason = "its node failed (NODE_FAIL)"
    outcome = _submitit_outcome(folder, job_id)
    if "timed-out" in outcome and status != Status.CANCELLED:
        status, reason = Status.TIMEOUT, "hit the Slurm time limit; raise --time"
    return record_lost(j, reason, log, status=status, stage="scheduler")


EXECUTOR = SlurmExecutor
