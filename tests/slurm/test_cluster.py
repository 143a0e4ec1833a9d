"""The single-node test cluster is real and behaves as the project relies on.

Every test talks to the real daemons through the real client commands
(sbatch, squeue, scancel, scontrol, sacct, sacctmgr, srun) and to submitit. The job
scripts write marker files into the test's tmp_path; the jobs run as root on
this machine, so the test reads them directly.

Batch scripts that must react to a signal background their sleep and `wait`
for it: bash runs a trap only after the foreground command returns.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ACTIVE_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


# ------------------------------------------------------------------ helpers
def run(cmd: list[str], check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


def wait_until(predicate, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def scontrol_job(job_id: str) -> dict[str, str]:
    """`scontrol show job -o` of one (non-array) job as a dict; {} once purged."""
    proc = run(["scontrol", "show", "job", "-o", job_id], check=False)
    if proc.returncode != 0:
        return {}
    return dict(re.findall(r"(\w+)=(\S*)", proc.stdout.splitlines()[0]))


def state(job_id: str) -> str:
    return scontrol_job(job_id).get("JobState", "")


def array_states(array_id: str, *, expand: bool = True, all_states: bool = False) -> dict[str, str]:
    cmd = ["squeue", "-h", "-j", array_id, "-o", "%i %T"]
    if expand:
        cmd.insert(2, "-r")
    if all_states:
        cmd[2:2] = ["-t", "all"]
    out = run(cmd).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def job_script(body: str) -> str:
    return "#!/bin/bash\n" + textwrap.dedent(body).lstrip()


# Writes $D/start.<jobid> (one line per run: restart count and time), handles
# TERM (marker, exit 143) and USR2 (marker, keeps running), sleeps 300 s.
SIGNAL_AWARE_JOB = job_script(
    """
    D="$1"
    echo "${SLURM_RESTART_COUNT:-unset} $(date +%s.%N)" >> "$D/start.$SLURM_JOB_ID"
    trap 'echo "TERM $(date +%s.%N)" >> "$D/signals.$SLURM_JOB_ID"; exit 143' TERM
    trap 'echo "USR2 $(date +%s.%N)" >> "$D/signals.$SLURM_JOB_ID"' USR2
    sleep 300 &
    echo $! > "$D/sleep_pid.$SLURM_JOB_ID"
    while kill -0 $! 2>/dev/null; do wait $!; done
    echo "end $(date +%s.%N)" >> "$D/signals.$SLURM_JOB_ID"
    """
)


@pytest.fixture
def submit(tmp_path, slurm_partition):
    """sbatch a script text; returns the job id. Cancels leftovers at teardown."""
    submitted: list[str] = []

    def _submit(script: str, *args: str, script_args: tuple[str, ...] = ()) -> str:
        path = tmp_path / f"job{len(submitted)}.sh"
        path.write_text(script)
        cmd = [
            "sbatch", "--parsable", f"--partition={slurm_partition}", f"--chdir={tmp_path}",
            f"--output={tmp_path}/slurm-%j.out", *args, str(path), *script_args,
        ]  # fmt: skip
        job_id = run(cmd).stdout.strip().split(";")[0]
        assert job_id.isdigit(), job_id
        submitted.append(job_id)
        return job_id

    yield _submit
    for job_id in submitted:
        run(["scancel", job_id], check=False)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# ------------------------------------------------------------------ cluster
def test_cluster_has_one_node_with_real_cpus_fake_gpus_and_expected_config(slurm_cluster):
    show = run(["scontrol", "show", "node", "-o", slurm_cluster.node]).stdout
    fields = dict(re.findall(r"(\w+)=(\S*)", show))
    assert int(fields["CPUTot"]) == os.cpu_count()
    mem_total_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    assert 0 < int(fields["RealMemory"]) < mem_total_mb
    assert fields["Gres"] == "gpu:2"
    assert fields["State"].split("+")[0] in {"IDLE", "MIXED", "ALLOCATED"}

    parts = run(["sinfo", "-h", "-o", "%P %l"]).stdout.split("\n")
    assert "debug* infinite" in parts
    assert slurm_cluster.default_partition == "debug"
    assert "short" in slurm_cluster.partitions

    config = dict(
        (k.strip(), v.strip())
        for k, _, v in (line.partition("=") for line in run(["scontrol", "show", "config"]).stdout.splitlines())
    )
    assert config["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert config["AccountingStorageEnforce"] == "associations,limits,qos"
    assert config["JobAcctGatherType"] == "jobacct_gather/none"
    assert config["ProctrackType"] == "proctrack/linuxproc"
    assert config["TaskPlugin"] == "task/none"
    assert config["SelectType"] == "select/cons_tres"
    assert config["JobRequeue"] == "1"
    assert config["KillWait"] == "5 sec"
    assert config["MinJobAge"] == "300 sec"
    assert config["SLURM_VERSION"].startswith("22.05")


# ------------------------------------------------------------------ arrays
def test_job_array_runs_every_task_with_at_most_two_at_once(submit, tmp_path):
    script = job_script(
        """
        D="$1"
        f="$D/task.$SLURM_ARRAY_TASK_ID"
        echo "$SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_JOB_ID $(date +%s.%N)" > "$f.tmp"
        sleep 3
        echo "$(date +%s.%N)" >> "$f.tmp"
        mv "$f.tmp" "$f"
        """
    )
    array_id = submit(script, "--array=0-4%2", script_args=(str(tmp_path),))
    max_running = 0

    def all_done() -> bool:
        nonlocal max_running
        states = array_states(array_id, all_states=True)
        max_running = max(max_running, sum(s == "RUNNING" for s in states.values()))
        return bool(states) and not (set(states.values()) & ACTIVE_STATES)

    wait_until(all_done, 90, "the array to finish")
    assert max_running <= 2

    intervals = []
    job_ids = set()
    for task in range(5):
        first, end = lines(tmp_path / f"task.{task}")
        arr, task_id, job_id, start = first.split()
        assert (arr, task_id) == (array_id, str(task))
        job_ids.add(job_id)
        intervals.append((float(start), float(end)))
    # Task 0 runs under the array's own id; the others get ids of their own.
    assert array_id in job_ids and len(job_ids) == 5
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    overlap = peak = 0
    for _, step in events:
        overlap += step
        peak = max(peak, overlap)
    assert 1 <= peak <= 2, intervals
    assert set(array_states(array_id, all_states=True).values()) == {"COMPLETED"}


def test_squeue_lists_every_array_task_state_in_one_call(submit):
    array_id = submit(job_script("sleep 120\n"), "--array=0-3%1")
    wait_until(lambda: array_states(array_id).get(f"{array_id}_0") == "RUNNING", 30, "task 0 running")

    expanded = array_states(array_id)  # squeue -r: one line per task
    assert expanded == {
        f"{array_id}_0": "RUNNING",
        f"{array_id}_1": "PENDING",
        f"{array_id}_2": "PENDING",
        f"{array_id}_3": "PENDING",
    }
    compact = array_states(array_id, expand=False)  # without -r pending tasks fold into one line
    assert compact == {f"{array_id}_0": "RUNNING", f"{array_id}_[1-3%1]": "PENDING"}

    run(["scancel", array_id])
    wait_until(
        lambda: set(array_states(array_id, all_states=True).values()) == {"CANCELLED"},
        30,
        "every task CANCELLED",
    )
    assert set(array_states(array_id, all_states=True)) == {f"{array_id}_{i}" for i in range(4)}


# ------------------------------------------------------------------ gres
def test_fake_gpu_gres_is_allocatable_and_oversized_requests_are_rejected(submit, tmp_path):
    script = job_script('env | grep -E "^(CUDA_VISIBLE_DEVICES|SLURM_JOB_GPUS|SLURM_GPUS_ON_NODE)=" | sort > "$1/gpu.$SLURM_JOB_ID"\n')
    jobs = [
        submit(script, "--gres=gpu:1", script_args=(str(tmp_path),)),
        submit(script, "--gpus-per-node=1", script_args=(str(tmp_path),)),
        submit(script, "--gres=gpu:2", script_args=(str(tmp_path),)),
    ]
    for job_id in jobs:
        wait_until(lambda: state(job_id) == "COMPLETED", 30, f"gpu job {job_id} COMPLETED")
    envs = [dict(line.split("=", 1) for line in lines(tmp_path / f"gpu.{j}")) for j in jobs]
    for env in envs[:2]:
        assert env["CUDA_VISIBLE_DEVICES"] in {"0", "1"}
        assert env["SLURM_GPUS_ON_NODE"] == "1"
    assert envs[2]["CUDA_VISIBLE_DEVICES"] == "0,1"

    too_many = run(["sbatch", "--parsable", "--gres=gpu:3", "--output=/dev/null", "--wrap=true"], check=False)
    assert too_many.returncode == 1
    assert "Requested node configuration is not available" in too_many.stderr


# ------------------------------------------------------------------ signals
def test_scancel_sends_sigterm_to_batch_script_and_state_becomes_cancelled(submit, tmp_path):
    job_id = submit(SIGNAL_AWARE_JOB, script_args=(str(tmp_path),))
    wait_until(lambda: (tmp_path / f"sleep_pid.{job_id}").exists(), 30, "job start")
    sleep_pid = int((tmp_path / f"sleep_pid.{job_id}").read_text())

    run(["scancel", job_id])
    wait_until(lambda: state(job_id) == "CANCELLED", 20, "state CANCELLED")
    assert [line.split()[0] for line in lines(tmp_path / f"signals.{job_id}")] == ["TERM"]

    def sleep_gone() -> bool:  # the job's child is killed too (linuxproc)
        try:
            os.kill(sleep_pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(sleep_gone, 15, "the job's sleep to be killed")
    info = scontrol_job(job_id)
    assert info["Reason"] == "None"
    assert info["ExitCode"] == "143:0"  # the trap's own exit status


def test_scancel_signal_usr2_reaches_batch_script_only_with_batch_flag(submit, tmp_path):
    job_id = submit(SIGNAL_AWARE_JOB, script_args=(str(tmp_path),))
    wait_until(lambda: (tmp_path / f"sleep_pid.{job_id}").exists(), 30, "job start")
    signals = tmp_path / f"signals.{job_id}"

    # Without --batch the signal goes to job steps only; this job has none.
    run(["scancel", "--signal=USR2", job_id])
    time.sleep(2)
    assert lines(signals) == []

    run(["scancel", "--signal=USR2", "--batch", job_id])
    wait_until(lambda: lines(signals), 10, "USR2 marker")
    assert [line.split()[0] for line in lines(signals)] == ["USR2"]
    assert state(job_id) == "RUNNING"  # the trap handled it; the job goes on


def test_scancel_signal_usr2_without_batch_flag_reaches_srun_steps(submit, tmp_path):
    # submitit runs its python in an srun step and signals it with a plain
    # `scancel --signal=USR2 <id>`; the batch shell itself is not signalled.
    script = job_script(
        """
        D="$1"
        trap 'echo batch >> "$D/usr2"' USR2
        srun bash -c 'trap "echo step >> $1/usr2" USR2; touch $1/step_up; sleep 120 & wait $!' _ "$D" &
        wait $!
        """
    )
    job_id = submit(script, script_args=(str(tmp_path),))
    wait_until(lambda: (tmp_path / "step_up").exists(), 30, "srun step start")
    run(["scancel", "--signal=USR2", job_id])
    wait_until(lambda: lines(tmp_path / "usr2"), 10, "USR2 in the step")
    time.sleep(1)
    assert lines(tmp_path / "usr2") == ["step"]


def test_time_limit_sends_warning_signal_then_kills_with_state_timeout(submit, tmp_path):
    # --time=1 is the minimum (minutes); slurmctld checks limits every ~30 s,
    # so the kill comes 60-90 s after the start. --signal=B:USR2@50 asks for
    # USR2 to the batch shell 50 s before the limit (same ~30 s granularity).
    job_id = submit(SIGNAL_AWARE_JOB, "--time=1", "--signal=B:USR2@50", script_args=(str(tmp_path),))
    wait_until(lambda: (tmp_path / f"start.{job_id}").exists(), 30, "job start")
    started = float(lines(tmp_path / f"start.{job_id}")[0].split()[1])

    wait_until(lambda: state(job_id) == "TIMEOUT", 150, "state TIMEOUT", interval=1)
    info = scontrol_job(job_id)
    assert info["Reason"] == "TimeLimit"
    assert info["TimeLimit"] == "00:01:00"
    events = [line.split() for line in lines(tmp_path / f"signals.{job_id}")]
    assert [e[0] for e in events] == ["USR2", "TERM"], events
    usr2_at, term_at = (float(e[1]) - started for e in events)
    assert usr2_at < term_at
    assert 55 <= term_at <= 130, f"killed {term_at:.0f}s after start"


def test_scontrol_requeue_reruns_job_with_incremented_restart_count(submit, tmp_path):
    job_id = submit(SIGNAL_AWARE_JOB, script_args=(str(tmp_path),))
    starts = tmp_path / f"start.{job_id}"
    wait_until(lambda: (tmp_path / f"sleep_pid.{job_id}").exists(), 30, "first run")
    assert state(job_id) == "RUNNING"

    run(["scontrol", "requeue", job_id])
    # The running batch script gets SIGTERM, the job goes back to PENDING
    # (Reason=BeginTime for cred_expire+1 s) and starts again under the same id.
    wait_until(lambda: len(lines(starts)) == 2, 90, "second run")
    assert [line.split()[0] for line in lines(starts)] == ["unset", "1"]
    assert lines(tmp_path / f"signals.{job_id}")[0].startswith("TERM")
    info = scontrol_job(job_id)
    assert info["Restarts"] == "1"
    assert info["JobState"] == "RUNNING"


# ------------------------------------------------------------------ accounting
def test_the_qos_refuses_a_submission_past_its_max_submit_jobs_per_user(submit):
    limit = int(run(["sacctmgr", "-n", "-P", "show", "qos", "capped", "format=MaxSubmitPU"]).stdout)
    assert run(["sacctmgr", "-n", "-P", "show", "user", "root", "format=DefaultAccount"]).stdout.strip() == "sweep"
    # held: queued, never started; every array task counts toward the limit
    first = submit(job_script("true\n"), "--hold", f"--array=0-{min(limit, 11) - 1}")
    rest = limit - min(limit, 11)
    if rest:
        submit(job_script("true\n"), "--hold", f"--array=0-{rest - 1}")
    assert len(array_states(first)) == min(limit, 11)
    refused = run(["sbatch", "--hold", "--wrap", "true", "--output=/dev/null"], check=False)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "sbatch: error: QOSMaxSubmitJobPerUserLimit",
        ("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's "
         "size and/or time limits)")]


def test_sacct_reads_a_finished_job_from_the_accounting_database(submit, slurm_cluster):
    job_id = submit(job_script("true\n"))
    wait_until(lambda: state(job_id) == "COMPLETED", 30, "job COMPLETED")
    # The exact command submitit's SlurmInfoWatcher runs; slurmctld sends the record to slurmdbd on its own time.
    cmd = ["sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", job_id]
    out = wait_until(lambda: (p := run(cmd)).stdout.count("COMPLETED") == 2 and p.stdout, 30, "sacct to know the job")
    assert out.splitlines() == ["JobID|State|NodeList", f"{job_id}|COMPLETED|{slurm_cluster.node}",
                                f"{job_id}.batch|COMPLETED|{slurm_cluster.node}"]  # the job, then its batch step


@pytest.fixture
def no_accounting(tmp_path, monkeypatch):
    """The clients read a copy of slurm.conf with AccountingStorageType=accounting_storage/none, as on the
    many clusters whose users have no accounting database: sacct and sacctmgr fail as they do there, while
    sbatch, squeue and scontrol talk to the same slurmctld."""
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    text = re.sub(r"(?m)^AccountingStorageType=.*$", "AccountingStorageType=accounting_storage/none", conf.read_text())
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "slurm.conf").write_text(re.sub(r"(?m)^AccountingStorageEnforce=.*\n", "", text))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "conf" / "slurm.conf"))


def test_sacct_fails_without_accounting_storage(submit, no_accounting):
    job_id = submit(job_script("true\n"))
    wait_until(lambda: state(job_id) == "COMPLETED", 30, "job COMPLETED")
    # The exact command submitit's SlurmInfoWatcher runs.
    proc = run(["sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", job_id], check=False)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip() == "Slurm accounting storage is disabled"
    plain = run(["sacct"], check=False)
    assert (plain.returncode, plain.stdout, plain.stderr.strip()) == (1, "", "Slurm accounting storage is disabled")
    # Finished jobs stay visible to scontrol/squeue for MinJobAge (300 s).
    assert run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"]).stdout.strip() == "COMPLETED"


# ------------------------------------------------------------------ submitit
def square(x: int) -> tuple[int, str | None, str | None]:
    return x * x, os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")


def gpu_env() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def sleep_long() -> None:
    time.sleep(300)


@pytest.fixture
def importable_tests(monkeypatch):
    # cloudpickle pickles module-level functions by reference: the job's
    # python must be able to import this module (jobs inherit the env).
    paths = [str(HERE), str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


def test_submitit_map_array_returns_results(slurm_partition, tmp_path, importable_tests):
    submitit = pytest.importorskip("submitit")
    executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
    executor.update_parameters(slurm_partition=slurm_partition, timeout_min=2)
    jobs = executor.map_array(square, [1, 2, 3])
    results = [job.result() for job in jobs]
    array_id = jobs[0].job_id.split("_")[0]
    assert [job.job_id for job in jobs] == [f"{array_id}_{i}" for i in range(3)]
    assert results == [(1, array_id, "0"), (4, array_id, "1"), (9, array_id, "2")]

    gpu_executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
    gpu_executor.update_parameters(slurm_partition=slurm_partition, timeout_min=2, gpus_per_node=1)
    assert gpu_executor.submit(gpu_env).result() in {"0", "1"}


def test_submitit_watcher_without_sacct_reports_unknown_and_never_done(
    slurm_partition, tmp_path, importable_tests, caplog, no_accounting
):
    submitit = pytest.importorskip("submitit")
    executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
    executor.update_parameters(slurm_partition=slurm_partition, timeout_min=2)
    job = executor.submit(sleep_long)
    try:
        wait_until(lambda: state(job.job_id) == "RUNNING", 30, "submitit job running")
        job.cancel()
        wait_until(lambda: state(job.job_id) == "CANCELLED", 20, "submitit job CANCELLED")
        with caplog.at_level(logging.WARNING, logger="submitit"):
            # sacct fails, submitit logs and bypasses the error: the state it
            # reports is UNKNOWN, which it counts as "not finished".
            assert job.state == "UNKNOWN"
            assert job.done(force_check=True) is False
        assert any("Bypassing sacct error" in r.getMessage() for r in caplog.records)
    finally:
        run(["scancel", job.job_id], check=False)
