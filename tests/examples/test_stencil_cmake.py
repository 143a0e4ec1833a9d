"""examples/stencil_cmake builds with real nvcc both ways: through the tool's dry run
(its Makefile, the target contract) for two configurations, one with the shared-
memory tile and one without, and by hand with CMake, taking conf.cuh from
-DCONF_DIR ahead of its own folder. Its space file loads with the 0/1 flag
(type: flag). Running it needs a GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.space import check, default_config, groups, load_space, make_config
from tests.conftest import dry_run_narrowed, needs_nvcc
from tests.examples.conf_build import kernel_symbols

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stencil_cmake"
pytestmark = needs_nvcc

MACROS = {"STENCIL_BLOCK_X": 64, "STENCIL_BLOCK_Y": 4, "STENCIL_USE_SHARED": 0, "STENCIL_RED_BLOCK": 128,
          "STENCIL_ITEMS": 16}


def test_the_space_file_loads_with_the_0_1_flag_and_two_groups():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.target.source_dir == EXAMPLE and space.size() == (288, "4*4*2*3*3")
    assert space.target.verify == "profile" and space.profile.backend == "events"
    assert space.target.events == ("--json", "{events_json}")
    assert [p.values for p in space.swept if p.macro == "STENCIL_USE_SHARED"] == [(0, 1)]
    assert [[p.macro for p in g] for g in groups(space)] == [
        ["STENCIL_BLOCK_X", "STENCIL_BLOCK_Y", "STENCIL_USE_SHARED"], ["STENCIL_RED_BLOCK", "STENCIL_ITEMS"]]
    assert default_config(space).as_dict() == {"STENCIL_BLOCK_X": 32, "STENCIL_BLOCK_Y": 8, "STENCIL_USE_SHARED": 1,
                                               "STENCIL_RED_BLOCK": 256, "STENCIL_ITEMS": 4}
    assert check(space, make_config(space, MACROS)) is None
    assert "whole warps" in check(space, make_config(space, {**MACROS, "STENCIL_BLOCK_X": 16, "STENCIL_BLOCK_Y": 1}))


@pytest.mark.slow
def test_a_dry_run_builds_the_shared_and_the_global_jacobi_through_the_makefile(tmp_path):
    p, jobs = dry_run_narrowed(EXAMPLE, tmp_path, {"STENCIL_BLOCK_X": [32], "STENCIL_BLOCK_Y": [8],
                                                    "STENCIL_USE_SHARED": [0, 1], "STENCIL_RED_BLOCK": [256],
                                                    "STENCIL_ITEMS": [4]}, strategy="grid")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "2 legal" in p.stdout + p.stderr
    for flag in (0, 1):
        job = jobs / "stencil-cmake" / f"B32x8_S{flag}_R256_I4"
        assert f"#define STENCIL_USE_SHARED {flag}" in (job / "conf.cuh").read_text()
        exe = job / "build" / "stencil"
        assert exe.is_file(), sorted(d.name for d in (jobs / "stencil-cmake").iterdir())
        if shutil.which("nm"):
            assert f"_Z13jacobi_kernelILi32ELi8ELi1ELi1ELi{flag}EEviPKfS1_Pf" in kernel_symbols(exe)
    built = [json.loads((jobs / "stencil-cmake" / f"B32x8_S{f}_R256_I4" / "built.json").read_text()) for f in (0, 1)]
    assert built[0]["build"]["objects"] != built[1]["build"]["objects"]   # the flag reached the compiler


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_cmake_builds_it_with_conf_cuh_from_conf_dir_first_on_the_include_path(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "conf.cuh").write_text("".join(f"#define {k} {v}\n" for k, v in MACROS.items()))
    build = tmp_path / "build"
    p = subprocess.run(["cmake", "-S", str(EXAMPLE), "-B", str(build), f"-DCONF_DIR={conf}",
                        "-DCMAKE_CUDA_ARCHITECTURES=90"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"stencil: conf.cuh from {conf}" in p.stdout
    p = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    exe = build / "stencil"
    assert exe.is_file() and not (EXAMPLE / "build").exists()
    includes = (build / "CMakeFiles" / "stencil.dir" / "includes_CUDA.rsp").read_text().split()
    assert includes[0].replace('"', "") == f"-I{conf}"   # CMake quotes some paths
    if shutil.which("nm"):
        symbols = kernel_symbols(exe)
        assert "_Z13jacobi_kernelILi64ELi4ELi1ELi1ELi0EEviPKfS1_Pf" in symbols
        assert "_Z23residual_partial_kernelILi128ELi16EEviPKfS1_Pd" in symbols


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_a_cmake_targets_dry_run_configures_once_and_builds_each_configuration_with_its_own_conf(tmp_path):
    data = yaml.safe_load((EXAMPLE / "space_cmake.yaml").read_text())
    data["target"]["dir"] = str(EXAMPLE)
    data["strategy"] = "grid"
    for macro, values in {"STENCIL_BLOCK_X": [32], "STENCIL_BLOCK_Y": [8], "STENCIL_USE_SHARED": [0, 1],
                          "STENCIL_RED_BLOCK": [256], "STENCIL_ITEMS": [4]}.items():
        data["parameters"][macro]["values"] = values
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    jobs = tmp_path / "jobs"
    p = subprocess.run([sys.executable, str(ROOT / "config_sweep.py"), "run", str(tmp_path / "space.yaml"), "--dry-run",
                        "--arch", "sm_90", "--jobs-dir", str(jobs), "--results-dir", str(tmp_path / "results")],
                       capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    sweep = jobs / "stencil-cmake-cmake"
    logs = [(sweep / f"B32x8_S{f}_R256_I4" / "build.log").read_text() for f in (0, 1)]
    assert sum(log.count("-- Configuring done") for log in logs) == 1          # one configure for the sweep
    assert len([d for d in (sweep / "_cmake").iterdir() if d.is_dir()]) == 1
    for flag in (0, 1):
        job = sweep / f"B32x8_S{flag}_R256_I4"
        if shutil.which("nm"):
            symbols = kernel_symbols(job / "build" / "stencil")
            assert f"_Z13jacobi_kernelILi32ELi8ELi1ELi1ELi{flag}EEviPKfS1_Pf" in symbols
        built = json.loads((job / "built.json").read_text())["build"]
        assert list(built["objects"]) == ["cmake/CMakeFiles/stencil.dir/stencil.cu.o"]   # not CMake's own
        assert {k["name"] for k in built["kernels"]} == {"jacobi_kernel", "residual_partial_kernel",
                                                          "residual_sum_kernel"}


def test_the_large_space_counts_634_legal_points_the_committed_brute_force_measured_them_all():
    """bench/data's cache of space_large.yaml, brute-forced on an H200 (bench/kt_cache.py): every
    configuration the tool calls legal ran and measured, nothing else ran."""
    import gzip

    large = load_space(EXAMPLE / "space_large.yaml")
    assert large.size() == (800, "5*5*4*4*2")
    cache = json.loads(gzip.open(ROOT / "bench" / "data" / "stencil_large_H200.json.gz").read())
    names = [p.macro for p in large.swept]
    assert cache["tune_params_keys"] == names and "H200" in cache["device_name"]
    points = [dict(zip(names, map(int, key.split(",")))) for key in cache["cache"]]
    assert len(points) == 634 and all(check(large, make_config(large, p)) is None for p in points)
    times = {key: e["time"] for key, e in cache["cache"].items()}
    assert all(isinstance(t, float) and t > 0 for t in times.values())
    assert min(times, key=times.get) == "64,1,1,4,0"
