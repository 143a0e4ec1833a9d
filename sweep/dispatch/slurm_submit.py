"""Submitting job arrays through submitit, and the record of every submission.

`submit` sends one array in one sbatch call (submitit's map_array): each task runs
SweepTask(job folder, stages), which records time limits and preemption itself.
Its options come from the space's slurm: settings (`executor_parameters`); a build
array (of a sweep with slurm.build_partition) goes to the build partition,
CPU-only, and a measure array may wait on one (`after`:
`--dependency=aftercorr:<build array>`: task i starts once task i succeeded). The
array's sbatch script is copied into every job folder (slurm_array.sbatch, or
slurm_build_array.sbatch) and each submission is appended to
jobs/<sweep>/_dispatch/slurm.json, which a later driver reads to watch what is
still queued instead of submitting it again; `array_status` sets those records
against one squeue answer (what `status` shows).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from sweep.core import atomic
from sweep.core.errors import SweepError
from sweep.dispatch import PendingJob, job_environment
from sweep.dispatch.slurm_limits import LIMIT_REFUSALS
from sweep.dispatch.slurm_queue import STATS, Queued
from sweep.node import group, gpus
from sweep.node.job import Termination, current_stage, run_job, slurm_job_id
from sweep.records import JobConfig, JobResult, Status, now, read_result, write_result
from sweep.space import Slurm


class SweepTask:
    """run_job, made checkpointable for submitit: records timeouts, requeues on preemption.

    A failed build stage exits non-zero, so that a measure task waiting on it with
    aftercorr never starts (its record is already written)."""

    def __init__(self, time_min: int):
        self.time_min = time_min
        self.started = time.time()

    def __call__(self, job_dir: str, stages: str) -> dict[str, Any]:
        self.started = time.time()
        Termination.watch()
        self.watch_time_limit()
        result = run_job(job_dir, stages, gpu_lock_path=None if stages == "build" else self.own_gpu_lock())
        if stages == "build" and result["status"] != Status.OK.value:
            raise SystemExit(f"build failed: {result['status']}: {result['reason']}")
        return result

    def watch_time_limit(self) -> None:
        """The scheduler's warning (USR2, signal_delay_s before the limit; Slurm may send it up to a
        minute early) past the guaranteed walltime ends the running program as its own deadline
        would: the job records `timeout` itself, with the stage's log and what the program printed,
        and the scheduler's kill finds nothing left. Earlier, it is a preemption: submitit's handler
        checkpoints and requeues (checkpoint)."""
        previous = signal.getsignal(signal.SIGUSR2)

        def on_warning(signum, frame):
            if self.timed_out():
                print(f"{time.strftime('%H:%M:%S')} the time limit is near (signal {signum}): ending the "
                      "running program", file=sys.stderr, flush=True)
                group.expire()
            elif callable(previous):
                previous(signum, frame)

        signal.signal(signal.SIGUSR2, on_warning)

    @staticmethod
    def own_gpu_lock() -> str | None:
        """The node-wide lock of the GPU Slurm gave this job (sweep.node.gpus), so a job measures alone on
        it whatever else runs on the node; none (said in the job's log) where the lock folder is unusable."""
        try:
            path = gpus.own_lock_path()
        except SweepError as e:
            print(f"warning: measuring without the node's GPU lock: {e}", file=sys.stderr)
            return None
        return str(path) if path else None

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


class SubmitLimit(SweepError):
    """sbatch refused an array for a limit that passes once tasks leave the queue."""


def executor_parameters(s: Slurm, sweep: str, build: bool = False) -> dict[str, Any]:
    """submitit SlurmExecutor parameters for the space's (and command line's) Slurm settings;
    build=True: those of a build array (the build partition, its CPUs and time, no GPU)."""
    time_min = s.build_time_min if build else s.time_min
    params: dict[str, Any] = {
        "job_name": f"sweep-{sweep}" + ("-build" if build else ""), "time": time_min,
        "cpus_per_task": s.build_cpus if build else s.cpus_per_job,
        "array_parallelism": s.array_parallelism, "stderr_to_stdout": True,
        # USR2 must come before the limit, even for a 1-minute test job
        "signal_delay_s": int(min(90, max(15, time_min * 60 // 4))),
    }
    if s.gpus_per_job and not build:
        params["gpus_per_node"] = s.gpus_per_job
    for key in ("partition", "account", "qos", "constraint", "mem"):
        v = s.build_partition if (build and key == "partition") else getattr(s, key)
        if build and key == "constraint":
            continue  # a GPU node feature (h100) would keep a CPU build off the CPU partition
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
    for p in s.partitions:
        _sbatch_value("partitions", p)
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


def records_path(sweep_dir: Path) -> Path:
    return Path(sweep_dir) / "_dispatch" / "slurm.json"


def load_records(sweep_dir: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(records_path(sweep_dir).read_text())
    except (OSError, ValueError):
        return []


def task_ids(record: dict[str, Any]) -> list[str]:
    """The job id of each task of a recorded array ('A_i')."""
    return record.get("job_ids") or [f"{record['array_id']}_{i}" for i in range(len(record["dirs"]))]


def submit(jobs: list[PendingJob], stages: str, sweep_dir: Path, s: Slurm, sweep: str, *,
           throttle: int | None = None, build: bool = False, after: str | None = None,
           partition: str = "") -> dict[str, Any]:
    """One sbatch for `jobs` as one array; returns (and records) the submission.

    stages: what each task runs (all | build | measure); build: a build array of a sweep
    with a build partition; after: the build array whose task i must succeed before task i
    starts; throttle: at most this many tasks at once (default slurm.array_parallelism);
    partition: where the tasks run instead of slurm.partition (not for a build array)."""
    import submitit

    build = build and bool(s.build_partition)
    folder = log_folder(sweep_dir, s)
    ex = submitit.SlurmExecutor(folder=str(folder), max_num_timeout=0)
    params = executor_parameters(s, sweep, build=build)
    params.setdefault("setup", [])
    params["setup"] = [f"export SWEEP_SLURM_LOG_DIR={folder}",
                       *(f"export {k}={v}" for k, v in job_environment().items())] + params["setup"]
    if throttle:
        params["array_parallelism"] = throttle
    if partition and not build:
        params["partition"] = _sbatch_value("partitions", partition)
    if after:
        params.setdefault("additional_parameters", {})["dependency"] = f"aftercorr:{after}"
    try:
        ex.update_parameters(**params)
    except ValueError as e:
        raise SweepError(f"Slurm settings rejected: {e}") from None
    try:
        task = SweepTask(s.build_time_min if build else s.time_min)
        sjobs = ex.map_array(task, [str(j.dir) for j in jobs], [stages] * len(jobs))
    except Exception as e:  # sbatch refused: say why, in one line
        msg = [l for l in str(e).strip().splitlines() if l.strip()]
        line = msg[-1] if msg else str(e)
        if LIMIT_REFUSALS.search(str(e)):
            raise SubmitLimit(line) from None
        raise SweepError(f"sbatch refused the array: {line}; check partition/account/qos/gres "
                         f"(`sinfo`), or the options in the space file's slurm: section") from None
    STATS.submissions += 1
    array_id = sjobs[0].job_id.split("_")[0]
    script = folder / f"{array_id}_submission.sh"
    if script.is_file():
        text = script.read_text()
        name = "slurm_build_array.sbatch" if build else "slurm_array.sbatch"
        for i, j in enumerate(jobs):
            atomic.write_text(j.dir / name,
                              f"# array {array_id}, task {i} of {len(jobs)} (this folder); the script every task ran:\n{text}")
    record = {"array_id": array_id, "job_ids": [sj.job_id for sj in sjobs],  # "A_i", or "A" for a lone job
              "tags": [j.tag for j in jobs], "dirs": [str(j.dir) for j in jobs],
              "hashes": [j.config_hash for j in jobs], "stages": stages, "submitted_at": now(), "log_dir": str(folder),
              "throttle": params["array_parallelism"], "build": build, "after": after,
              "partition": params.get("partition", "")}
    atomic.write_json(records_path(sweep_dir), load_records(sweep_dir) + [record])
    return record


def array_status(records: list[dict[str, Any]], queued: dict[str, Queued] | None) -> list[dict[str, Any]]:
    """Per recorded array: its tasks pending (with the reasons Slurm gives, e.g. Priority, Resources,
    JobArrayTaskLimit, QOSMaxJobsPerUserLimit), running, and done (left the queue), from one
    squeue answer (`queued`; None where squeue cannot be asked: only the totals)."""
    out = []
    for r in records:
        ids = task_ids(r)
        entry: dict[str, Any] = {"array_id": r["array_id"], "kind": "build" if r.get("build") else r["stages"],
                                 "tasks": len(ids), "after": r.get("after")}
        if queued is not None:
            pending = [queued[j].reason or "None" for j in ids if j in queued and queued[j].state == "PENDING"]
            running = sum(1 for j in ids if j in queued and queued[j].state != "PENDING")
            entry.update(pending=len(pending), running=running, done=len(ids) - len(pending) - running,
                         reasons=dict(Counter(pending).most_common()))
        out.append(entry)
    return out
