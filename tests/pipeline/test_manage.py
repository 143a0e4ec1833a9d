"""Nothing the tool does not own is touched: clean takes sweep names only and deletes
inside the sweep's own folders; one driver per sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.node import lock
from sweep.pipeline import manage
from sweep.core.errors import SweepError
from sweep.records import Manifest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path):
    """jobs/ and results/ with one real sweep, and a sentinel file everywhere a bad clean could reach."""
    jobs, results = tmp_path / "work" / "jobs", tmp_path / "work" / "results"
    (jobs / "real" / "T1" / "build").mkdir(parents=True)
    (jobs / "real" / "T1" / "config.json").write_text('{"sweep": "real", "tag": "T1"}')
    Manifest("real", "/x.yaml", "grid", "events", "local", 1, "1", "c", "d", "t").save(jobs / "real")
    (results / "real").mkdir(parents=True)
    for d in (tmp_path, tmp_path / "work", jobs, results, jobs / "_cache"):
        d.mkdir(parents=True, exist_ok=True)
        (d / "SENTINEL").write_text("must survive")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "SENTINEL").write_text("must survive")
    (jobs / "linked").symlink_to(outside)
    (results / "linked").symlink_to(outside)
    return tmp_path, jobs, results


def _sentinels(root: Path) -> int:
    return len(list(root.rglob("SENTINEL")))


@pytest.mark.parametrize("name", ["..", ".", "/", "../work", "/etc", "real/..", "", "linked", "_cache", "a b"])
def test_clean_refuses_anything_but_a_sweep_name_and_deletes_nothing(tree, name):
    root, jobs, results = tree
    before = _sentinels(root)
    with pytest.raises(SweepError) as err:
        manage.clean(name, jobs, results, everything=True)
    assert "\n" not in str(err.value)
    assert _sentinels(root) == before and (jobs / "real" / "sweep.json").is_file()


def test_clean_all_removes_exactly_the_sweeps_two_folders(tree):
    root, jobs, results = tree
    before = _sentinels(root)
    removed = manage.clean("real", jobs, results, everything=True)
    assert {jobs / "real", results / "real"} <= set(removed) and all(p.is_relative_to(jobs / "real") or p.is_relative_to(results / "real") for p in removed)
    assert not (jobs / "real").exists() and not (results / "real").exists() and _sentinels(root) == before


def test_clean_cli_refuses_dotdot_with_one_line_and_exit_1(tree):
    root, jobs, results = tree
    p = subprocess.run([sys.executable, str(ROOT / "config_sweep.py"), "clean", "..", "--all", "--jobs-dir", str(jobs),
                        "--results-dir", str(results)], capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "not a sweep name" in p.stderr
    assert (root / "work" / "SENTINEL").is_file() and (jobs / "real").is_dir()


HOLD = """
import sys, time
from pathlib import Path
from sweep.node.lock import DriverLock
with DriverLock(Path(sys.argv[1]), "s"):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder(sweep_dir: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(sweep_dir)], stdout=subprocess.PIPE, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_driver_is_refused_naming_the_first_and_a_killed_ones_lock_is_taken_over(tmp_path, capsys):
    first = _holder(tmp_path)
    try:
        with pytest.raises(SweepError, match=rf"another driver \(host \S+, pid {first.pid}, since "):
            with lock.DriverLock(tmp_path, "s"):
                pass
        assert lock.holder(tmp_path)["alive"] is True
    finally:
        first.kill()
        first.wait()
    assert lock.holder(tmp_path)["alive"] is False        # status tells a dead driver from a running one
    with lock.DriverLock(tmp_path, "s"):
        assert json.loads((tmp_path / lock.LOCK).read_text())["pid"] == os.getpid()
    assert "took over the lock" in capsys.readouterr().err
    assert lock.holder(tmp_path) is None                  # released cleanly: nothing to take over


def test_a_lock_held_on_another_host_is_refused_until_its_heartbeat_is_stale(tmp_path):
    info = {"host": "elsewhere", "pid": 1, "started": "t", "heartbeat": time.time()}
    (tmp_path / lock.LOCK).write_text(json.dumps(info))
    with pytest.raises(SweepError, match="host elsewhere"):
        with lock.DriverLock(tmp_path, "s"):
            pass
    (tmp_path / lock.LOCK).write_text(json.dumps(info | {"heartbeat": time.time() - lock.STALE_S - 1}))
    with lock.DriverLock(tmp_path, "s"):
        pass


def test_a_wrongly_shaped_result_is_set_aside_by_status_and_the_rerun_measures_it_again(toy_sweep, tmp_path, fake_gpus):
    import shutil

    from sweep.pipeline import driver as pipeline

    space, jobs, _, _ = toy_sweep
    shutil.copytree(jobs / "toy", tmp_path / "jobs" / "toy", ignore=shutil.ignore_patterns("build"))
    bad = tmp_path / "jobs" / "toy" / "A64_B32x1" / "result.json"
    bad.write_text(json.dumps({"schema": "sweep-result/1", "sweep": "toy", "status": "ok", "measurements": [{"x": 1}]}))
    s = manage.status("toy", tmp_path / "jobs")                       # no traceback
    assert s["counts"].get("pending") == 1
    assert list(bad.parent.glob("result.json.bad-*"))                 # kept for inspection, out of the way
    again = pipeline.run(space, pipeline.Options(executor="debug", jobs_root=tmp_path / "jobs",
                                                 results_root=tmp_path / "results", confirm=False, report=False))
    assert again.counts == {"ok": 1}
    assert json.loads(bad.read_text())["status"] == "ok"


def test_collect_and_report_read_the_space_as_run_after_the_file_was_edited_and_moved(write_space, dirs, fake_gpus):
    from sweep import report
    from sweep.pipeline import driver as pipeline

    jobs, results = dirs
    space = write_space(parameters={"ALPHA_BLOCK": {"tag": "A", "values": [64, 128], "kernels": ["alpha_kernel"]},
                                    "BETA_X": {"tag": "B", "values": [32], "kernels": ["beta_kernel"]},
                                    "BETA_Y": {"tag": "B", "values": [4], "kernels": ["beta_kernel"]}})
    pipeline.run(space, pipeline.Options(executor="debug", jobs_root=jobs, results_root=results, confirm=False,
                                         report=False))
    space.write_text("name: toy\nparameters: {}\n")      # edited beyond recognition...
    space.rename(space.with_name("moved.yaml"))           # ...and moved
    best, _ = manage.recollect("toy", jobs, results)
    assert best.config["ALPHA_BLOCK"] == 128
    page = report.write_report(results / "toy").read_text()
    assert "ALPHA_BLOCK" in page and "could not be loaded" not in page


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_status_does_not_show_a_job_as_running_when_its_state_files_process_is_gone(tree):
    import socket

    from sweep.records import JobConfig

    _, jobs, _ = tree
    cfg = JobConfig(sweep="real", tag="T1", macros={"A": 1}, config_hash="h", space_path="/x.yaml", commit="c",
                    target={}, build={}, run={}, profile={"backend": "events"})
    (jobs / "real" / "T1" / "config.json").write_text(json.dumps(cfg.to_dict()))
    state = {"stage": "profile", "host": socket.gethostname(), "started": "t", "slurm_job": ""}
    (jobs / "real" / "T1" / "state.json").write_text(json.dumps(state | {"pid": _dead_pid()}))
    assert manage.status("real", jobs)["running"] == []
    (jobs / "real" / "T1" / "state.json").write_text(json.dumps(state | {"pid": os.getpid()}))
    assert [r["tag"] for r in manage.status("real", jobs)["running"]] == ["T1"]


def test_a_driver_whose_pid_is_gone_shows_as_gone_even_while_a_leftover_child_holds_its_lock(tmp_path):
    """kill -9 of the driver alone: a process it started may still hold the lock file open."""
    import fcntl
    import socket

    with open(tmp_path / lock.LOCK, "a+") as f:   # the flock held by a process that outlived the driver
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.write(json.dumps({"host": socket.gethostname(), "pid": _dead_pid(), "started": "t",
                            "heartbeat": time.time()}))
        f.flush()
        assert lock.holder(tmp_path)["alive"] is False
