"""examples/tiled_gemm, the "bring your own program" example, builds with real
nvcc by the target contract: default tiles, a conf.cuh from CONF_DIR through the
sweep's multi-word NVCC and an ARCH list, and an illegal conf.cuh that stops at
its static_assert (which the sweep records as skipped). Running it needs a GPU
(tests/gpu/test_cupti_gpu.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sweep.space import check, load_space, make_config
from tests.examples.conf_build import kernel_symbols, make_with_conf, refused_at_static_assert, sweeps_nvcc
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiled_gemm"
pytestmark = needs_nvcc

TILES_B = {"GEMM_BM": 128, "GEMM_BN": 64, "GEMM_BK": 8, "GEMM_TM": 8, "GEMM_TN": 8}
TOO_MUCH_SHARED = {"GEMM_BM": 128, "GEMM_BN": 128, "GEMM_BK": 64, "GEMM_TM": 8, "GEMM_TN": 8}  # 64 KB


def test_tiled_gemm_builds_for_sm_90_with_its_default_tiles(tmp_path):
    p = make_with_conf(EXAMPLE, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    exe = tmp_path / "build" / "tiled_gemm"
    assert exe.is_file()
    if shutil.which("nm"):
        assert "_Z17gemm_tiled_kernelILi64ELi64ELi16ELi4ELi4EEviiiPKfS1_Pf" in kernel_symbols(exe)
    assert not (EXAMPLE / "build").exists()


def test_tiled_gemm_takes_conf_cuh_from_conf_dir_through_the_sweeps_nvcc_and_an_arch_list(tmp_path):
    p = make_with_conf(EXAMPLE, tmp_path, TILES_B, arch="sm_80 sm_90",
                       extra=(f"NVCC={sweeps_nvcc(tmp_path)}", "NVCCFLAGS=-O3"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    exe = tmp_path / "build" / "tiled_gemm"
    assert "objcache: miss" in p.stderr + p.stdout
    if shutil.which("nm"):
        assert "_Z17gemm_tiled_kernelILi128ELi64ELi8ELi8ELi8EEviiiPKfS1_Pf" in kernel_symbols(exe)
    if shutil.which("cuobjdump"):
        elfs = subprocess.run(["cuobjdump", "--list-elf", str(exe)], capture_output=True, text=True).stdout
        assert "sm_80" in elfs and "sm_90" in elfs


def test_illegal_tiles_stop_the_build_at_the_static_assert_which_the_sweep_records_as_skipped(tmp_path):
    reason = refused_at_static_assert(EXAMPLE, tmp_path, TOO_MUCH_SHARED)
    assert reason == ("static_assert: (GEMM_BM+GEMM_BN)*GEMM_BK*4 bytes of shared memory must be <= 48 KB "
                      "(the static limit)")


def test_the_example_space_file_loads_and_its_constraints_reject_what_the_static_asserts_reject():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.target.source_dir == EXAMPLE and space.size() == (108, "3*3*3*2*2")
    assert space.target.verify == "profile" and space.profile.backend == "cupti"
    assert check(space, make_config(space, TILES_B)) is None
    assert "48 KB" in (check(space, make_config(space, TOO_MUCH_SHARED)) or "")


# space_large.yaml: the same program over wider values, for brute force and learned search
BIG_PATCH = {"GEMM_BM": 256, "GEMM_BN": 128, "GEMM_BK": 8, "GEMM_TM": 16, "GEMM_TN": 8}     # 128 accumulators
ONE_EACH = {"GEMM_BM": 16, "GEMM_BN": 16, "GEMM_BK": 64, "GEMM_TM": 1, "GEMM_TN": 1}       # one element per thread


def test_the_large_space_holds_1552_legal_points_and_every_legal_point_of_the_small_one():
    import itertools

    large, small = load_space(EXAMPLE / "space_large.yaml"), load_space(EXAMPLE / "space.yaml")
    assert large.size() == (3125, "5*5*5*5*5") and large.name == "tiled-gemm-large"
    assert large.target.source_dir == EXAMPLE and large.target.verify == "profile"

    def legal(space):
        names = [p.macro for p in space.swept]
        points = (dict(zip(names, v)) for v in itertools.product(*[p.values for p in space.swept]))
        return [p for p in points if check(space, make_config(space, p)) is None]

    big = legal(large)
    assert len(big) == 1552
    assert all(check(large, make_config(large, p)) is None for p in legal(small))
    assert {p.macro: p.default for p in large.swept} == {p.macro: p.default for p in small.swept}
    assert BIG_PATCH in big and ONE_EACH in big
    assert "128 accumulators" in check(large, make_config(large, {**BIG_PATCH, "GEMM_TN": 16}))


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_the_committed_brute_forces_measured_exactly_the_legal_set_and_agree_on_the_optimum(gpu):
    """bench/data's caches of space_large.yaml, brute-forced on the GPUs (bench/kt_cache.py):
    every configuration the tool calls legal ran and measured, nothing else ran."""
    import gzip
    import json

    large = load_space(EXAMPLE / "space_large.yaml")
    cache = json.loads(gzip.open(ROOT / "bench" / "data" / f"tiled_gemm_large_{gpu}.json.gz").read())
    names = [p.macro for p in large.swept]
    assert cache["tune_params_keys"] == names and gpu in cache["device_name"]
    points = [dict(zip(names, map(int, key.split(",")))) for key in cache["cache"]]
    assert len(points) == 1552 and all(check(large, make_config(large, p)) is None for p in points)
    times = {key: e["time"] for key, e in cache["cache"].items()}
    assert all(isinstance(t, float) and t > 0 for t in times.values())
    assert min(times, key=times.get) == "32,128,16,8,2"


@pytest.mark.slow
@pytest.mark.parametrize("tiles", [BIG_PATCH, ONE_EACH], ids=["T256x128_K8_P16x8", "T16x16_K64_P1x1"])
def test_the_large_spaces_extreme_tiles_build(tmp_path, tiles):
    p = make_with_conf(EXAMPLE, tmp_path, tiles)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if shutil.which("nm"):
        t = tiles
        mangled = (f"_Z17gemm_tiled_kernelILi{t['GEMM_BM']}ELi{t['GEMM_BN']}ELi{t['GEMM_BK']}ELi{t['GEMM_TM']}"
                   f"ELi{t['GEMM_TN']}EEviiiPKfS1_Pf")
        assert mangled in kernel_symbols(tmp_path / "build" / "tiled_gemm")
