"""Sweeps through the real test cluster: job arrays, every fault, resume.

The CPU toy target stands in for the engine (real nvcc builds, no GPU); its
bench sleeps TOY_BENCH_SLEEP_MS, so a job can be caught while it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from sweep.node.process import current_stage

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "tests" / "data" / "toy_target"


def toy_space(tmp_path: Path, name: str, alphas=(64, 128), beta_x=(32,), time_min=5, **extra) -> Path:
    space = {
        "name": name,
        "target": {"name": "toy", "dir": str(TOY), "verify": ["{build}/toy_check"],
                   "profile": ["{build}/toy_bench", "-n", "{iterations}"], "events": ["--json", "{events_json}"]},
        "strategy": "grid",
        "parameters": {"ALPHA_BLOCK": {"tag": "A", "values": list(alphas), "default": 128, "kernels": ["alpha_kernel"]},
                       "BETA_X": {"tag": "B", "values": list(beta_x), "default": 32, "kernels": ["beta_kernel"]}},
        "build": {"arch": ["sm_90"], "nvcc_flags": ["-O2"]},
        "run": {"iterations": 3},
        "profile": {"backend": "events"},
        "slurm": {"partition": "debug", "cpus_per_job": 1, "time_min": time_min, "array_parallelism": 2},
    }
    space.update(extra)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


def cli(*args, env=None, **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "config_sweep.py"), *args]
    full_env = {**os.environ, **(env or {})}
    if kw.pop("background", False):
        return subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=kw.pop("timeout", 900))


def result(jobs: Path, sweep: str, tag: str) -> dict:
    return json.loads((jobs / sweep / tag / "result.json").read_text())


def wait_for(predicate, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def running_job_id(jobs: Path, sweep: str, tag: str) -> str:
    """The Slurm job id of a task once it is running (from its state.json)."""
    state = jobs / sweep / tag / "state.json"
    wait_for(lambda: current_stage(state.parent) == "profile", 240, f"{tag} to profile")
    return json.loads(state.read_text())["slurm_job"]


@contextlib.contextmanager
def sweep_in_background(tmp_path: Path, name: str, sleep_ms: int, **space):
    """A slurm sweep of the toy space running while the test acts on its jobs; yields (driver, jobs)."""
    jobs = tmp_path / "jobs"
    driver = cli("run", str(toy_space(tmp_path, name, **space)), "--executor", "slurm", "--no-confirm",
                 "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "r"), env={"TOY_BENCH_SLEEP_MS": str(sleep_ms)},
                 background=True)
    try:
        yield driver, jobs
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)


def test_dry_run_sweep_is_one_job_array_of_real_nvcc_builds(tmp_path):
    jobs = tmp_path / "jobs"
    p = cli("run", str(toy_space(tmp_path, "dry", alphas=(64, 128, 256))), "--executor", "slurm", "--dry-run",
            "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "r"))
    assert p.returncode == 0, p.stdout + p.stderr
    records = json.loads((jobs / "dry" / "_dispatch" / "slurm.json").read_text())
    assert len(records) == 1 and sorted(records[0]["tags"]) == ["A128_B32", "A256_B32", "A64_B32"]
    for tag in records[0]["tags"]:
        d = jobs / "dry" / tag
        assert (d / "build" / "toy_bench").is_file() and json.loads((d / "built.json").read_text())["build"]["arch"] == "sm_90"
        assert "#SBATCH --array=0-2%2" in (d / "slurm_array.sbatch").read_text()
        assert not (d / "result.json").exists()  # a dry run measures nothing


def test_sweep_through_slurm_measures_picks_and_confirms(tmp_path):
    jobs = tmp_path / "jobs"
    p = cli("run", str(toy_space(tmp_path, "ok", alphas=(64, 96, 128))), "--executor", "slurm", "--jobs-dir", str(jobs),
            "--results-dir", str(tmp_path / "r"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ok: ok 2, verify_failed 1" in p.stdout and "ALPHA_BLOCK=128" in p.stdout, p.stdout + p.stderr
    assert result(jobs, "ok", "A96_B32")["status"] == "verify_failed"
    assert (tmp_path / "r" / "ok" / "best" / "conf.cuh").is_file()


def test_crash_inside_a_slurm_job_is_recorded_runtime_failed_and_the_sweep_goes_on(tmp_path):
    jobs = tmp_path / "jobs"
    p = cli("run", str(toy_space(tmp_path, "crash", alphas=(128,), beta_x=(3, 32))), "--executor", "slurm", "--no-confirm",
            "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "r"))
    assert p.returncode == 0, p.stdout + p.stderr
    r = result(jobs, "crash", "A128_B3")
    assert (r["status"], r["stage"]) == ("runtime_failed", "profile") and "SIGABRT" in r["reason"]
    assert result(jobs, "crash", "A128_B32")["status"] == "ok"


def test_job_hitting_its_time_limit_is_recorded_timeout_with_its_stage(tmp_path):
    jobs = tmp_path / "jobs"
    p = cli("run", str(toy_space(tmp_path, "slow", alphas=(128,), time_min=1)), "--executor", "slurm", "--no-confirm",
            "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "r"), env={"TOY_BENCH_SLEEP_MS": "300000"},
            timeout=400)
    assert p.returncode == 3, p.stdout + p.stderr  # exit 3: nothing was measured (its only configuration timed out)
    r = result(jobs, "slow", "A128_B32")
    assert r["status"] == "timeout" and r["stage"] == "profile" and "time limit" in r["reason"]
    # whichever ended it, the job's own deadline or Slurm's warning (USR2, which Slurm may send up to
    # a minute early), the job recorded it itself: the log is the stage's own, not Slurm's
    assert r["log"] and Path(r["log"]).name == "profile.log"


def test_cancelled_job_is_recorded_cancelled_and_the_sweep_goes_on(tmp_path):
    # 20 s of "measuring": scancel comes within a poll (0.5 s) of the job reaching profile, so the
    # job is still measuring then even on a loaded machine; more would only be waited out.
    with sweep_in_background(tmp_path, "cancel", 20000, alphas=(64, 128)) as (driver, jobs):
        subprocess.run(["scancel", running_job_id(jobs, "cancel", "A64_B32")], check=True)
        # the other job finishes on its own (20 s of "measuring")
        out, _ = driver.communicate(timeout=400)
    assert driver.returncode == 0, out
    r = result(jobs, "cancel", "A64_B32")
    assert (r["status"], r["stage"]) == ("cancelled", "profile") and "cancelled during profile" in r["reason"]
    assert result(jobs, "cancel", "A128_B32")["status"] == "ok"


def test_preempted_job_is_requeued_and_finishes_with_the_preemption_in_its_history(tmp_path):
    with sweep_in_background(tmp_path, "preempt", 15000, alphas=(128,), time_min=30) as (driver, jobs):
        job = running_job_id(jobs, "preempt", "A128_B32")
        # what Slurm sends on preemption (and before the time limit): USR2 to the job's step
        subprocess.run(["scancel", "--signal=USR2", job], check=True)
        out, _ = driver.communicate(timeout=600)
    assert driver.returncode == 0, out
    r = result(jobs, "preempt", "A128_B32")
    assert r["status"] == "ok" and r["attempt"] >= 2
    assert any(h["status"] == "preempted" for h in r["history"]), r["history"]


def test_killed_driver_resumes_without_losing_or_rerunning_any_tag(tmp_path):
    jobs = tmp_path / "jobs"
    space = toy_space(tmp_path, "resume", alphas=(64, 128, 256, 512))
    args = ["run", str(space), "--executor", "slurm", "--no-confirm", "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "r")]
    env = {"TOY_BENCH_SLEEP_MS": "8000"}
    first = cli(*args, env=env, background=True)
    records = jobs / "resume" / "_dispatch" / "slurm.json"
    wait_for(lambda: records.is_file(), 240, "the array to be submitted")
    running_job_id(jobs, "resume", "A64_B32")
    os.killpg(first.pid, signal.SIGKILL)  # kill -9 mid-sweep
    first.wait()
    status = cli("status", "resume", "--jobs-dir", str(jobs))  # from another shell, from files alone
    assert status.returncode == 0 and "running A64_B32" in status.stdout
    second = cli(*args, env=env, timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "still queued from an earlier run: watching them, not resubmitting" in second.stderr
    arrays = json.loads(records.read_text())
    assert len(arrays) == 1  # nothing was submitted twice
    for tag in ("A64_B32", "A128_B32", "A256_B32", "A512_B32"):
        r = result(jobs, "resume", tag)
        assert r["status"] == "ok" and r["attempt"] == 1
        runs = (jobs / "resume" / tag / "profile.log").read_text().count("toy_bench")
        assert runs == 1, f"{tag} measured {runs} times"


def test_scheduler_is_polled_once_per_interval_for_the_whole_array(tmp_path):
    from sweep.pipeline import driver as pipeline
    from sweep.dispatch import slurm

    before = slurm.STATS.squeue_calls
    t0 = time.monotonic()
    pipeline.run(toy_space(tmp_path, "poll", alphas=(64, 128, 256)),
                 pipeline.Options(executor="slurm", jobs_root=tmp_path / "jobs", results_root=tmp_path / "r",
                                  confirm=False, report=False, poll_s=2.0))
    elapsed = time.monotonic() - t0
    calls = slurm.STATS.squeue_calls - before
    assert calls <= elapsed / 2.0 + 3  # one squeue per 2 s interval for all three tasks, not one per task
    assert slurm.STATS.sacct_calls == 0  # never needs an accounting database


def test_a_node_failing_under_a_job_is_survived_and_recorded(tmp_path):
    node = subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True).stdout.split()[0]
    try:
        with sweep_in_background(tmp_path, "nodefail", 20000, alphas=(128,), time_min=30) as (driver, jobs):
            running_job_id(jobs, "nodefail", "A128_B32")
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=sweep-node-failure-test"],
                           check=True)
            # The test cluster returns a responding node to service by itself (ReturnToService=2),
            # so the resume below is only needed, and only legal, when it is still down.
            time.sleep(8)
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True)
            out, _ = driver.communicate(timeout=600)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True)
    assert driver.returncode == 0, out
    r = result(jobs, "nodefail", "A128_B32")
    # Slurm requeues a batch job whose node failed (JobRequeue=1): the job is killed, runs again
    # once the node is back, and finishes, with the killed attempt in its history.
    assert r["status"] == "ok" and r["attempt"] >= 2, r
    assert [h["status"] for h in r["history"]] == ["cancelled", "requeued"], r
    node_state = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True).stdout.split()
    assert node_state[:1] == ["idle"], node_state
