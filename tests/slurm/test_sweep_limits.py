"""A sweep within the test cluster's limits: MaxArraySize (11 here, see cluster.sh) and a
submit limit: the QOS capped's MaxSubmitJobsPerUser (15), read with sacctmgr from the
accounting database and enforced by slurmctld, or slurm.max_submit below it.

The swept knob is read by no translation unit of the toy target, so every build after
the first comes from the object cache and a task takes a few seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from test_sweep_slurm import result, toy_space

from sweep.pipeline import driver as pipeline, manage
from sweep.dispatch import slurm
from sweep.dispatch.slurm_limits import read_limits
from sweep.space import Slurm


def knob_space(tmp_path: Path, name: str, n: int, **slurm_settings) -> Path:
    """n configurations of the toy target differing only in a macro nothing reads."""
    return toy_space(tmp_path, name, parameters={
        "ALPHA_BLOCK": {"tag": "A", "values": [128], "kernels": ["alpha_kernel"]},
        "BETA_X": {"tag": "B", "values": [32], "kernels": ["beta_kernel"]},
        "UNUSED_KNOB": {"tag": "U", "values": list(range(1, n + 1)), "kernels": ["no_such_kernel"]}},
        slurm={"partition": "debug", "cpus_per_job": 1, "time_min": 5, "array_parallelism": 2, **slurm_settings})


def run(space: Path, tmp_path: Path) -> pipeline.RunSummary:
    return pipeline.run(space, pipeline.Options(executor="slurm", jobs_root=tmp_path / "jobs", results_root=tmp_path / "r",
                                                confirm=False, report=False, poll_s=1.0))


def measured_once(jobs: Path, sweep: str, tags: list[str]) -> None:
    for tag in tags:
        r = result(jobs, sweep, tag)
        assert r["status"] == "ok" and r["attempt"] == 1, (tag, r["status"], r["reason"])
        runs = (jobs / sweep / tag / "profile.log").read_text().count("toy_bench")
        assert runs == 1, f"{tag} measured {runs} times"


class QueueWatcher(threading.Thread):
    """Counts the user's tasks in the queue (pending or running) every 0.3 s, as squeue shows them,
    and keeps what `status` says of the sweep's arrays each time."""

    def __init__(self, jobs: Path, sweep: str):
        super().__init__(daemon=True)
        self.jobs, self.sweep = jobs, sweep
        self.most, self.samples, self.arrays, self.stop = 0, 0, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True).stdout
            self.most = max(self.most, len([l for l in out.splitlines() if l.strip()]))
            self.samples += 1
            self.status()
            time.sleep(0.3)
        self.status()   # once the sweep has returned: its arrays as they ended (the last look may predate that)

    def status(self) -> None:
        if (self.jobs / self.sweep / "sweep.json").is_file():
            self.arrays.extend(manage.status(self.sweep, self.jobs)["arrays"])


def max_array_size() -> int:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    return int(config.split("MaxArraySize")[1].split("=")[1].split()[0])


def qos_limit() -> int:
    """MaxSubmitJobsPerUser of the QOS cluster.sh makes every user's default, as sacctmgr shows it."""
    out = subprocess.run(["sacctmgr", "-n", "-P", "show", "qos", "capped", "format=MaxSubmitPU"],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def test_limits_come_from_scontrol_and_the_qos_in_the_accounting_database(slurm_cluster):
    limit = qos_limit()
    limits = read_limits(Slurm(), "root")
    assert limits.array_size == max_array_size() and limits.max_submit == limit  # below MaxJobCount (10000)
    assert f"at most {limit} tasks queued at once: MaxSubmitJobsPerUser {limit} of QOS capped (sacctmgr)" \
        in limits.describe()
    below = read_limits(Slurm(max_submit=3), "root")  # a setting below the QOS leaves room for other work
    assert below.max_submit == 3 and "slurm.max_submit 3" in below.describe()


def stop_daemon(pidfile: Path) -> None:
    pid = int(pidfile.read_text())
    os.kill(pid, 15)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError(f"{pidfile.name}: pid {pid} still running 30 s after SIGTERM")


@pytest.mark.parametrize("outage, reason", [
    ("sacctmgr", "sacctmgr not found on PATH"),
    ("slurmdbd", "failed to open persistent connection to host:localhost:6819: Connection refused"),
    ("mariadb", ("Something happened with the receiving/processing of the persistent connection init message to "
                 "localhost:6819: Unable to connect to database")),
])
def test_where_sacctmgr_cannot_say_the_limit_is_max_job_count_or_the_setting_with_a_one_line_note(
        outage, reason, slurm_cluster, tmp_path, monkeypatch):
    if outage == "sacctmgr":  # a login node without it: scontrol alone on PATH
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "scontrol").symlink_to(subprocess.run(["which", "scontrol"], capture_output=True,
                                                                  text=True, check=True).stdout.strip())
        monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    else:
        stop_daemon(slurm_cluster.state_dir / f"{outage}.pid")
    try:
        limits, setting = read_limits(Slurm(), "root"), read_limits(Slurm(max_submit=4), "root")
    finally:
        monkeypatch.undo()
        start = subprocess.run(["bash", str(slurm_cluster.script), "start"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=180, check=False)
        assert start.returncode == 0, start.stdout + start.stderr
    note = limits.describe()
    assert "\n" not in note and limits.max_submit == 10000, note  # MaxJobCount, Slurm's default
    assert (f"no QOS or association submit limit read (sacctmgr: {reason}), so only MaxJobCount and "
            f"slurm.max_submit limit submissions") in note
    assert note.endswith("at most 10000 tasks queued at once: MaxJobCount 10000 (scontrol show config)")
    assert setting.max_submit == 4 and setting.describe().endswith("at most 4 tasks queued at once: slurm.max_submit 4")


def test_a_plan_larger_than_max_array_size_goes_out_as_several_arrays_measuring_each_config_once(tmp_path):
    max_array = max_array_size()
    n = max_array + 2
    s = run(knob_space(tmp_path, "split", n), tmp_path)
    assert s.counts == {"ok": n}
    records = json.loads((tmp_path / "jobs" / "split" / "_dispatch" / "slurm.json").read_text())
    sizes = [len(r["tags"]) for r in records]
    assert len(records) >= 2 and max(sizes) <= max_array and sum(sizes) == n, sizes
    tags = [t for r in records for t in r["tags"]]
    assert len(set(tags)) == n  # no configuration went out twice
    measured_once(tmp_path / "jobs", "split", tags)


def test_the_submit_limit_is_never_exceeded_while_the_plan_drains(tmp_path):
    limit, n = 3, 7
    watcher = QueueWatcher(tmp_path / "jobs", "limited")
    watcher.start()
    before = slurm.STATS.submissions
    try:
        s = run(knob_space(tmp_path, "limited", n, max_submit=limit), tmp_path)
    finally:
        watcher.stop.set()
        watcher.join()
    assert s.counts == {"ok": n}
    assert watcher.samples > 20 and watcher.most == limit, (watcher.most, watcher.samples)  # filled, never beyond
    assert slurm.STATS.submissions - before >= 3  # the plan drained through several arrays
    records = json.loads((tmp_path / "jobs" / "limited" / "_dispatch" / "slurm.json").read_text())
    measured_once(tmp_path / "jobs", "limited", [t for r in records for t in r["tags"]])
    # status, meanwhile: per array its tasks pending (with Slurm's reason), running and done
    assert all(a["pending"] + a["running"] + a["done"] == a["tasks"] for a in watcher.arrays)
    assert any(a["reasons"].get("JobArrayTaskLimit") for a in watcher.arrays), watcher.arrays[:20]
    assert any(a["running"] for a in watcher.arrays) and watcher.arrays[-1]["done"] == watcher.arrays[-1]["tasks"]


def test_a_plan_past_the_qos_submit_limit_drains_as_tasks_leave_and_never_passes_it(slurm_cluster, tmp_path, capsys):
    limit = qos_limit()
    n = limit + 2          # no slurm.max_submit: the limit is the QOS's, read with sacctmgr
    watcher = QueueWatcher(tmp_path / "jobs", "qos")
    watcher.start()
    before = slurm.STATS.submissions
    try:
        s = run(knob_space(tmp_path, "qos", n, array_parallelism=limit + 1), tmp_path)
    finally:
        watcher.stop.set()
        watcher.join()
    notes = capsys.readouterr().err
    assert s.counts == {"ok": n}
    assert f"at most {limit} tasks queued at once: MaxSubmitJobsPerUser {limit} of QOS capped (sacctmgr)" in notes
    assert "sbatch refused" not in notes  # the driver kept to the limit: slurmctld never had to refuse
    assert watcher.samples > 20 and watcher.most == limit, (watcher.most, watcher.samples)  # filled, never beyond
    assert slurm.STATS.submissions - before >= 3  # 11 (MaxArraySize), 4 (the QOS's room), the rest as tasks left
    records = json.loads((tmp_path / "jobs" / "qos" / "_dispatch" / "slurm.json").read_text())
    measured_once(tmp_path / "jobs", "qos", [t for r in records for t in r["tags"]])
