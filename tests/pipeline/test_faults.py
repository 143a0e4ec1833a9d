"""Faults injected for real into real driver processes: Ctrl-C (SIGINT) during a build,
two drivers on one sweep, kill -9 of a driver, a full disk. Nothing measured is lost,
an interruption never becomes a configuration's result, and the rerun measures it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from sweep.node.process import current_stage
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

pytestmark = needs_nvcc


def _space(tmp_path: Path, alphas=(64, 128), **run) -> Path:
    space = yaml.safe_load((DATA / "toy_space.yaml").read_text())
    space["target"]["dir"] = str(DATA / "toy_target")
    space["parameters"]["ALPHA_BLOCK"]["values"] = list(alphas)
    space["parameters"]["BETA_X"]["values"] = [32]
    space["parameters"]["BETA_Y"]["values"] = [4]
    space["run"].update(run)
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


def _driver(tmp_path: Path, *args: str, jobs: Path | None = None, env: dict[str, str] | None = None,
            sigint: object = signal.SIG_DFL) -> subprocess.Popen:
    """The driver, started with SIGINT's disposition `sigint` (SIG_IGN: as a shell script's
    background job starts), in a session of its own."""
    jobs = jobs or tmp_path / "jobs"
    cmd = [sys.executable, str(ROOT / "config_sweep.py"), "run", str(tmp_path / "toy.yaml"), "--jobs-dir", str(jobs),
           "--results-dir", str(tmp_path / "results"), "--no-report", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": "0", **(env or {})},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))


def _wait_for(predicate, timeout_s: float = 120.0, what: str = "") -> None:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _results(jobs: Path) -> dict[str, dict]:
    return {d.name: json.loads((d / "result.json").read_text()) for d in (jobs / "toy").glob("A*")
            if (d / "result.json").is_file()}


def _a_job_at(jobs: Path, *stages: str) -> bool:
    """Whether some toy job announces one of `stages`; current_stage reads "" for a state.json
    that a job finishing between the glob and the read has just removed."""
    return any(current_stage(d) in stages for d in (jobs / "toy").glob("A*"))


def _still_running(jobs: Path, pattern: str) -> list[str]:
    """Processes matching `pattern` whose command line names the jobs folder, each as
    "pid (parent pid, state): command line", so that a failure says which process it was."""
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    mine = []
    for pid in found:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_text(errors="replace").replace("\0", " ").strip()
            state, parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):      # it ended meanwhile
            continue
        if str(jobs) in cmdline:
            mine.append(f"{pid} (parent {parent}, {state}): {cmdline}")
    return mine


def test_ctrl_c_during_a_build_leaves_no_result_and_the_rerun_measures_it(tmp_path):
    _space(tmp_path)
    jobs = tmp_path / "jobs"
    p = _driver(tmp_path, "--executor", "local", sigint=signal.SIG_IGN)   # as a script's `&` starts it
    _wait_for(lambda: _a_job_at(jobs, "build"), what="a build to start")
    os.killpg(p.pid, signal.SIGINT)          # what Ctrl-C sends: the driver, make and nvcc alike
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "interrupted" in err
    for r in _results(jobs).values():        # whatever ended before the interrupt is a real result
        assert "Interrupt" not in r["reason"] and r["status"] != "compile_failed"
    left = _still_running(jobs, "make")
    assert not left, "a stopped build's make (or its compilers) still runs: " + "; ".join(left)
    again = _driver(tmp_path, "--executor", "local")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert {t: r["status"] for t, r in _results(jobs).items()} == {"A64_B32x4": "ok", "A128_B32x4": "ok"}


def test_a_second_driver_on_the_same_sweep_is_refused_and_a_killed_driver_shows_as_gone(tmp_path):
    _space(tmp_path)
    jobs = tmp_path / "jobs"
    first = _driver(tmp_path, "--executor", "local", env={"TOY_BENCH_SLEEP_MS": "3000"})
    _wait_for(lambda: (jobs / "toy" / "_driver.lock").is_file() and (jobs / "toy" / "_driver.lock").read_text(),
              what="the first driver's lock")
    second = _driver(tmp_path, "--executor", "local")
    _, err = second.communicate(timeout=120)
    assert second.returncode == 1 and f"pid {first.pid}" in err and "another driver" in err
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    st = subprocess.run([sys.executable, str(ROOT / "config_sweep.py"), "status", "toy", "--jobs-dir", str(jobs),
                         "--format", "json"], capture_output=True, text=True)
    assert st.returncode == 0 and json.loads(st.stdout)[0]["driver"]["alive"] is False
    again = _driver(tmp_path, "--executor", "local")
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0 and "took over the lock" in err, err
    assert {r["status"] for r in _results(jobs).values()} == {"ok"}


def test_a_run_where_nothing_is_measured_exits_3(tmp_path):
    _space(tmp_path, alphas=(96,))           # the toy computes wrong results at 96: verify_failed
    p = _driver(tmp_path, "--executor", "local", "--no-confirm")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 3 and "nothing was measured" in err, err


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(mount)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip()}): needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_ends_the_run_naming_the_filesystem_and_records_nothing_half_written(tmp_path, small_disk):
    _space(tmp_path, alphas=(64, 128, 256, 512))
    p = _driver(tmp_path, "--executor", "local", "--dry-run", "--arch", "sm_90", jobs=small_disk / "jobs")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 4, err
    assert f"({small_disk})" in err and "is full" in err and err.count("error:") == 1, err
    for r in _results(small_disk / "jobs").values():
        assert "No space" not in r["reason"] and "ld returned" not in r["reason"]



@pytest.mark.parametrize("free_bytes", [0, 4096, 16384])
def test_a_disk_already_full_before_the_first_job_ends_the_run_with_one_message_not_a_traceback(
        tmp_path, small_disk, free_bytes):
    """The driver's own writes (its lock, the space snapshot, a job's conf.cuh) hit the
    full disk before any build does: the same one message and exit 4, no traceback."""
    _space(tmp_path, alphas=(64, 128))
    (small_disk / "filler").write_bytes(b"\0" * max(0, shutil.disk_usage(small_disk).free - free_bytes))
    p = _driver(tmp_path, "--executor", "local", "--dry-run", "--arch", "sm_90", jobs=small_disk / "jobs")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 4 and "is full" in err and err.count("error:") == 1 and "Traceback" not in err, err
    assert not [r for r in _results(small_disk / "jobs").values() if r["status"] == "compile_failed"]


@pytest.mark.parametrize("started", [signal.SIG_DFL, signal.SIG_IGN], ids=["foreground", "background-job"])
def test_ctrl_c_while_measuring_stops_the_local_jobs_says_so_and_prints_no_traceback(tmp_path, started):
    # background-job: SIGINT comes ignored (a script's `&`); the workers handle it all the same, so
    # the driver must too, or it records the jobs they stopped as failed
    _space(tmp_path)
    jobs = tmp_path / "jobs"
    p = _driver(tmp_path, "--executor", "local", "--no-confirm", env={"TOY_BENCH_SLEEP_MS": "60000"}, sigint=started)
    _wait_for(lambda: _a_job_at(jobs, "verify", "profile"), timeout_s=300, what="a job to measure")
    time.sleep(1.0)
    os.killpg(p.pid, signal.SIGINT)          # what Ctrl-C sends: the driver, its controllers and jobs
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    stopped = re.search(r"interrupted: stopped (\d+) running job\(s\); the same command resumes", err)
    assert stopped and int(stopped[1]) >= 1, err           # the one measuring, and any building beside it
    assert "keep running" not in err
    assert not _results(jobs)                                   # an interrupt is no result: the rerun measures it
    left = _still_running(jobs, "toy_bench")
    assert not left, "the stopped job's program still runs: " + "; ".join(left)
