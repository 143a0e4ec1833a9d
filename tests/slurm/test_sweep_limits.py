"""A sweep within the test cluster's limits: MaxArraySize (11 here, see cluster.sh) and a
submit limit (slurm.max_submit; the test cluster has no accounting database, so no QOS).

The swept knob is read by no translation unit of the toy target, so every build after
the first comes from the object cache and a task takes a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from test_sweep_slurm import result, toy_space

from sweep import manage, pipeline
from sweep.executors import slurm
from sweep.executors.slurm_limits import read_limits
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
            if (self.jobs / self.sweep / "sweep.json").is_file():
                self.arrays.extend(manage.status(self.sweep, self.jobs)["arrays"])
            time.sleep(0.3)


def max_array_size() -> int:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    return int(config.split("MaxArraySize")[1].split("=")[1].split()[0])


def test_limits_come_from_scontrol_and_the_setting_where_sacctmgr_has_no_database():
    limits = read_limits(Slurm(max_submit=3), "root")
    assert limits.array_size == max_array_size() and limits.max_submit == 3  # max_submit is below MaxJobCount
    assert "slurm.max_submit 3" in limits.describe()
    assert read_limits(Slurm(), "root").max_submit == 10000  # MaxJobCount, Slurm's default


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
