"""Bring your own program, on a GPU: examples/tiled_gemm swept with the cupti backend
(every launch shape measured, the pick the fastest measured); nsys and ncu on a
program that never calls cudaProfilerStart; launches the runtime refuses for
their size recorded as skipped with the resource, the amount and the limit."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sweep.pipeline import driver as pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiled_gemm"
LIMITS = ROOT / "tests" / "data" / "h100" / "launch_limits"
SIZES = {(4, 4, 1): 256, (8, 8, 1): 512, (16, 16, 1): 1024}   # grids of 64 x 64 tiles, and what the others give
ROWS = [[64, 64, 16, 4, 4], [32, 32, 8, 4, 4], [128, 128, 16, 8, 8], [128, 64, 8, 8, 8], [32, 64, 32, 4, 4]]


def example_space(tmp_path: Path, name: str, rows=ROWS, **changes) -> Path:
    space = yaml.safe_load((EXAMPLE / "space.yaml").read_text())
    space["name"] = name
    space["target"]["dir"] = str(EXAMPLE)
    space["strategy"] = "tuples"
    space["tuples"] = {"columns": ["GEMM_BM", "GEMM_BN", "GEMM_BK", "GEMM_TM", "GEMM_TN"], "rows": rows}
    space["run"] = {"warmup": 2, "iterations": 10}
    for key, value in changes.items():
        space[key] = {**space.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


def run(space: Path, sweep_roots, **opts) -> pipeline.RunSummary:
    jobs, results = sweep_roots
    return pipeline.run(space, pipeline.Options(executor="local", jobs_root=jobs, results_root=results, **opts))


def test_a_cupti_sweep_of_the_example_measures_every_launch_shape_and_picks_the_fastest(tmp_path, sweep_roots):
    s = run(example_space(tmp_path, "byop-cupti"), sweep_roots)
    assert s.counts == {"ok": len(ROWS)}
    m = pd.read_csv(s.results_dir / "measurements.csv")
    sweep = m[(m["role"] == "sweep") & (m["status"] == "ok")]
    assert set(sweep["kernel"]) == {"gemm_tiled_kernel"} and set(sweep["backend"]) == {"cupti"}
    for tag, rows in sweep.groupby("tag"):
        assert len(rows) == 3 and set(rows["iterations"]) == {10} and set(rows["calls"]) == {1}, tag
    totals = sweep.groupby("tag")["total_median_ns"].sum()
    fastest = sweep[sweep["tag"] == totals.idxmin()].iloc[0]
    assert s.best.config == {k: int(fastest[k]) for k in ("GEMM_BM", "GEMM_BN", "GEMM_BK", "GEMM_TM", "GEMM_TN")}
    configs = pd.read_csv(s.results_dir / "configs.csv")
    assert set(configs.loc[configs["status"] == "ok", "capture"]) == {"whole run"}


def test_a_self_checking_run_holds_the_gpu_once_per_configuration(tmp_path, sweep_roots):
    import json

    s = run(example_space(tmp_path, "byop-held", rows=ROWS[:2]), sweep_roots, confirm=False)
    for result in s.sweep_dir.glob("*/result.json"):
        r = json.loads(result.read_text())
        assert "verify" not in r["intervals"] and r["intervals"]["gpu"][0] <= r["intervals"]["profile"][0]
        assert (result.parent / "profile.log").read_text().count("\n$ ") == 1


@pytest.mark.parametrize("backend", [
    pytest.param("nsys", marks=pytest.mark.skipif(not (os.environ.get("NSYS") or shutil.which("nsys")),
                                                  reason="nsys not on PATH")),
    pytest.param("ncu", marks=pytest.mark.skipif(not (os.environ.get("NCU") or shutil.which("ncu")),
                                                 reason="ncu not on PATH"))])
def test_a_program_without_cudaProfilerStart_is_profiled_over_its_whole_run(tmp_path, sweep_roots, backend):
    space = example_space(tmp_path, f"byop-whole-{backend}", rows=ROWS[:1], profile={"backend": backend},
                          run={"warmup": 2, "iterations": 3, "args": ["--no-profiler-range"]})
    s = run(space, sweep_roots, confirm=False)
    assert s.counts == {"ok": 1}
    configs = pd.read_csv(s.results_dir / "configs.csv")
    assert list(configs["capture"]) == ["whole run"]
    m = pd.read_csv(s.results_dir / "measurements.csv")
    assert {tuple(int(x) for x in g.split("x")) for g in m["grid"]} == set(SIZES)


def limits_target(tmp_path: Path, what: str, backend: str) -> Path:
    src = tmp_path / "limits_src"
    src.mkdir(exist_ok=True)
    shutil.copy(LIMITS / "launch_limits.cu", src)
    (src / "Makefile").write_text(
        "BUILD_DIR ?= build\nNVCC ?= nvcc\nARCH ?= sm_90\nNVCCFLAGS ?= -O3\n"
        ".PHONY: all\nall: $(BUILD_DIR)/launch_limits\n"
        "$(BUILD_DIR)/launch_limits: launch_limits.cu\n\tmkdir -p $(BUILD_DIR)\n"
        "\t$(lastword $(NVCC)) $(NVCCFLAGS) $(foreach a,$(ARCH),-gencode arch=compute_$(a:sm_%=%),code=$(a)) $< -o $@\n")
    space = {"name": f"limits-{what}-{backend}", "target": {"name": "launch_limits", "dir": str(src),
             "profile": ["{build}/launch_limits", what]}, "strategy": "grid",
             "parameters": {"UNUSED": {"values": [1]}}, "profile": {"backend": backend}}
    path = tmp_path / f"{what}-{backend}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


NSYS = pytest.mark.skipif(not (os.environ.get("NSYS") or shutil.which("nsys")), reason="nsys not on PATH")


@pytest.mark.parametrize("what, backend, reason", [
    pytest.param("registers", "cupti", "resource limit: registers per block 131072 registers > 65536 registers",
                 id="registers"),
    pytest.param("threads", "cupti", "resource limit: threads per block 2048 threads > 1024 threads", id="threads"),
    pytest.param("block_z", "cupti", "resource limit: block.z 128 > 64", id="block-z"),
    pytest.param("bounds", "cupti", "resource limit: threads per block 512 threads", id="launch-bounds"),
    pytest.param("registers", "nsys", "resource limit: registers per block 131072 registers > 65536 registers",
                 marks=NSYS, id="registers-under-nsys-diagnosed-with-cupti"),
])
def test_a_launch_the_runtime_refuses_for_its_size_is_skipped_naming_the_resource(tmp_path, sweep_roots, what,
                                                                                   backend, reason):
    s = run(limits_target(tmp_path, what, backend), sweep_roots, confirm=False)
    configs = pd.read_csv(s.results_dir / "configs.csv")
    row = configs[configs["role"] == "sweep"].iloc[0]
    assert row["status"] == "skipped", row["reason"]
    assert str(row["reason"]).startswith(reason), row["reason"]
