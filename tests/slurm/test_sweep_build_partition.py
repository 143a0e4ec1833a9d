"""Builds as a CPU-only array on a build partition, each measure task after its own build
(`--dependency=aftercorr`), on the real test cluster (partition `cpu`, see cluster.sh)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from test_sweep_slurm import ROOT, TOY, cli, result, toy_space, wait_for


def planted_target(tmp_path: Path) -> Path:
    """The toy target, with ALPHA_BLOCK == 48 failing to compile."""
    target = tmp_path / "toy_target"
    shutil.copytree(TOY, target, ignore=shutil.ignore_patterns("build"))
    with open(target / "alpha.cu", "a") as f:
        f.write('\n#if ALPHA_BLOCK == 48\n#error "planted compile failure"\n#endif\n')
    return target


def build_space(tmp_path: Path, name: str, alphas, target: Path = TOY) -> Path:
    return toy_space(tmp_path, name, alphas=alphas, target={
        "name": "toy", "dir": str(target), "verify": ["{build}/toy_check"],
        "profile": ["{build}/toy_bench", "-n", "{iterations}"], "events": ["--json", "{events_json}"]},
        slurm={"partition": "debug", "cpus_per_job": 1, "gpus_per_job": 1, "time_min": 5, "array_parallelism": 2,
               "build_partition": "cpu", "build_cpus": 1, "build_time_min": 5})


def arrays(jobs: Path, sweep: str) -> list[dict]:
    return json.loads((jobs / sweep / "_dispatch" / "slurm.json").read_text())


def scheduler_state(job_id: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
    return out.split("JobState=")[1].split()[0] if "JobState=" in out else ""


def test_a_failed_build_cancels_only_its_own_measure_task_and_only_measuring_gets_a_gpu(tmp_path):
    jobs = tmp_path / "jobs"
    p = cli("run", str(build_space(tmp_path, "bp", (48, 64, 128), planted_target(tmp_path))), "--executor", "slurm",
            "--no-confirm", "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "r"))
    assert p.returncode == 0, p.stdout + p.stderr
    builds, measures = [r for r in arrays(jobs, "bp") if r["build"]], [r for r in arrays(jobs, "bp") if not r["build"]]
    assert len(builds) == 1 and len(measures) == 1 and measures[0]["after"] == builds[0]["array_id"]
    d = jobs / "bp" / "A64_B32"
    build_script, measure_script = (d / "slurm_build_array.sbatch").read_text(), (d / "slurm_array.sbatch").read_text()
    assert "#SBATCH --partition=cpu" in build_script and "gpus" not in build_script
    assert "#SBATCH --partition=debug" in measure_script and "#SBATCH --gpus-per-node=1" in measure_script
    assert f"#SBATCH --dependency=aftercorr:{builds[0]['array_id']}" in measure_script

    failed = result(jobs, "bp", "A48_B32")
    assert (failed["status"], failed["stage"]) == ("compile_failed", "build"), failed
    assert failed["reason"].startswith("build failed:") and "planted compile failure" in failed["reason"]
    assert "its measure task was cancelled" in failed["reason"]
    i = measures[0]["tags"].index("A48_B32")
    assert scheduler_state(measures[0]["job_ids"][i]) == "CANCELLED"
    for tag in ("A64_B32", "A128_B32"):
        r = result(jobs, "bp", tag)
        assert r["status"] == "ok" and r["env"]["gpu"] == "toy" and r["env"]["gpu_uuid"].startswith("toy-GPU-"), r
        assert scheduler_state(measures[0]["job_ids"][measures[0]["tags"].index(tag)]) == "COMPLETED"


# The driver, stopped right after the build array went out (before the measure array).
PAUSED_DRIVER = """
import sys, time
sys.path.insert(0, {root!r})
import sweep.dispatch.slurm as slurm
real = slurm.submit
def submit(*args, **kw):
    rec = real(*args, **kw)
    if kw.get("build"):
        open({flag!r}, "w").close()
        time.sleep(600)
    return rec
slurm.submit = submit
from sweep import cli
sys.exit(cli.main({argv!r}))
"""


def test_a_driver_killed_between_the_build_and_measure_arrays_resumes_measuring_each_build_once(tmp_path):
    jobs, flag = tmp_path / "jobs", tmp_path / "builds-submitted"
    argv = ["run", str(build_space(tmp_path, "bk", (64, 128, 256))), "--executor", "slurm", "--no-confirm",
            "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "r")]
    first = subprocess.Popen([sys.executable, "-c", PAUSED_DRIVER.format(root=str(ROOT), flag=str(flag), argv=argv)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_for(flag.exists, 120, "the build array to be submitted")
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # kill -9 between the two arrays
        first.wait()
    assert [r["build"] for r in arrays(jobs, "bk")] == [True]

    second = cli(*argv, timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    records = arrays(jobs, "bk")
    assert [r["build"] for r in records].count(True) == 1  # nothing was built twice
    measured = [t for r in records if not r["build"] for t in r["tags"]]
    assert sorted(measured) == ["A128_B32", "A256_B32", "A64_B32"]  # each measured once, none waiting on a build
    assert all(r["after"] is None for r in records if not r["build"])
    for tag in measured:
        r = result(jobs, "bk", tag)
        assert r["status"] == "ok" and r["attempt"] == 1
        assert (jobs / "bk" / tag / "profile.log").read_text().count("toy_bench") == 1
