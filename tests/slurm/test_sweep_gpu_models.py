"""A sweep over two GPU partitions on the real test cluster: every configuration measured on
each, results and picks per GPU model, one conf.cuh per model, the models side by side.

Both partitions hold the same node; the toy target names its "GPU model" after the
partition its job ran in (TOY_GPU_MODEL, set by the sbatch script from SLURM_JOB_PARTITION).
"""

from __future__ import annotations

import json

import pandas as pd
from test_sweep_slurm import cli, result, toy_space


def test_a_sweep_over_two_gpu_partitions_picks_per_model_and_compares_them(tmp_path):
    jobs, results = tmp_path / "jobs", tmp_path / "r"
    space = toy_space(tmp_path, "models", alphas=(64, 128), slurm={
        "partition": "debug", "partitions": ["debug", "short"], "cpus_per_job": 1, "time_min": 5,
        "array_parallelism": 2, "setup": ["export TOY_GPU_MODEL=toy-$SLURM_JOB_PARTITION"]})
    p = cli("run", str(space), "--executor", "slurm", "--no-confirm", "--jobs-dir", str(jobs), "--results-dir", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    records = json.loads((jobs / "models" / "_dispatch" / "slurm.json").read_text())
    assert sorted((r["partition"], tuple(sorted(r["tags"]))) for r in records) == [
        ("debug", ("A128_B32__debug", "A64_B32__debug")), ("short", ("A128_B32__short", "A64_B32__short"))]
    for model in ("toy-debug", "toy-short"):
        folder = results / f"models.{model}"
        measured = pd.read_parquet(folder / "measurements.parquet")
        assert set(measured["gpu"]) == {model} and len(set(measured["tag"])) == 2
        assert json.loads((folder / "best.json").read_text())["config"]["ALPHA_BLOCK"] == 128
        assert "#define ALPHA_BLOCK 128" in (results / "models" / "best" / model / "conf.cuh").read_text()
        assert f"best launch sizes on {model}" in p.stdout
    assert not (results / "models" / "best.json").exists()  # no pick across GPU models
    best = cli("best", "models", "--results-dir", str(results))
    assert best.returncode == 0 and "// toy-debug:" in best.stdout and "// toy-short:" in best.stdout
    report = cli("report", "models", "--jobs-dir", str(jobs), "--results-dir", str(results))
    assert report.returncode == 0 and report.stdout.split() == [
        str(results / "models.toy-debug" / "report.html"), str(results / "models.toy-short" / "report.html")]
    compare = cli("compare", "models.toy-debug", "models.toy-short", "--results-dir", str(results), "--format", "markdown")
    assert compare.returncode == 0, compare.stderr
    assert "models.toy-debug" in compare.stdout and "models.toy-short" in compare.stdout


def test_each_gpu_models_picks_are_raced_and_confirmed_on_its_own_partition(tmp_path):
    jobs, results = tmp_path / "jobs", tmp_path / "r"
    space = toy_space(tmp_path, "racemodels", alphas=(64, 128), slurm={
        "partition": "debug", "partitions": ["debug", "short"], "cpus_per_job": 1, "time_min": 5,
        "array_parallelism": 2, "setup": ["export TOY_GPU_MODEL=toy-$SLURM_JOB_PARTITION"]})
    p = cli("run", str(space), "--executor", "slurm", "--jobs-dir", str(jobs), "--results-dir", str(results))
    assert p.returncode == 0, p.stdout + p.stderr
    records = json.loads((jobs / "racemodels" / "_dispatch" / "slurm.json").read_text())
    where = {t: r["partition"] for r in records for t in r["tags"]}
    races = {t: part for t, part in where.items() if t.startswith("race_")}
    assert sorted(races.values()) == ["debug", "short"]                      # one race per model, on its partition
    for part in ("debug", "short"):
        model = f"toy-{part}"
        for tag in (f"default__{part}", f"best__{part}"):                   # baseline and combined best, there too
            assert where[tag] == part and result(jobs, "racemodels", tag)["env"]["gpu"] == model
        folder = results / f"racemodels.{model}"
        best = json.loads((folder / "best.json").read_text())
        (alpha,) = [c for c in best["choices"] if c["macros"] == ["ALPHA_BLOCK"]]
        assert alpha["certification"]["status"] in ("certified", "tie") and alpha["certification"]["rounds"] >= 3
        conf = json.loads((folder / "confirmation.json").read_text())
        assert conf["best_total_ns"] > 0 and conf["default_total_ns"] > 0
