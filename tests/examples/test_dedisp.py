"""examples/dedisp (incoherent dedispersion, the shape of the community's dedispersion space): its
space file counts 11,130 legal points with the tool's own enumeration, the kernel builds with real
nvcc from conf.cuh's macros, the program rejects a problem whose shifts do not fit before it touches
a GPU, and an illegal configuration stops at the static_assert that names its rule (a sweep records
it as skipped). Running it needs a GPU (tests/gpu/test_dedisp_gpu.py)."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

from tests.examples.conf_build import (kernel_symbols, make_with_conf, refused_at_static_assert,
                                       refused_before_cuda)
from sweep.plan.learned import legal_points
from sweep.space import check, default_config, load_space, make_config
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dedisp"
OPTIMUM_H200 = {"DEDISP_BLOCK_X": 16, "DEDISP_BLOCK_Y": 32, "DEDISP_TILE_X": 4, "DEDISP_TILE_Y": 8,
                "DEDISP_STRIDE_X": 1, "DEDISP_STRIDE_Y": 1}


def make(tmp: Path, macros: dict[str, int] | None = None) -> subprocess.CompletedProcess:
    return make_with_conf(EXAMPLE, tmp, macros)


def test_the_space_counts_11130_legal_points_and_its_default_is_one():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.size() == (22_272, "6*29*4*8*2*2") and space.strategy.name == "learning"
    points = legal_points(space)
    assert len(points) == 11_130 and OPTIMUM_H200 in points
    assert check(space, default_config(space)) is None
    strided_single = {**default_config(space).as_dict(), "DEDISP_TILE_X": 1}   # STRIDE_X 1 with one sample
    assert "not a knob" in check(space, make_config(space, strided_single))


@needs_nvcc
def test_the_default_configuration_builds_for_sm_90_and_rejects_shifts_that_do_not_fit(tmp_path):
    p = make(tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if (symbols := kernel_symbols(tmp_path / "build" / "dedisp")) is not None:
        assert "_Z13dedisp_kernelILi4ELi64ELi2ELi2ELi1ELi0EEv13DedispProblemPKhPKfPf" in symbols
    # 256 channels shift 256 samples by DM 3851
    refused_before_cuda(tmp_path / "build" / "dedisp", ["--dms", "3851"], "lower --dms to at most 3850")


@needs_nvcc
def test_an_illegal_configuration_stops_at_the_static_assert_naming_its_rule(tmp_path):
    macros = {"DEDISP_BLOCK_X": 32, "DEDISP_BLOCK_Y": 64}      # 2048 threads
    space = load_space(EXAMPLE / "space.yaml")
    assert check(space, make_config(space, {**default_config(space).as_dict(), **macros})) is not None
    assert refused_at_static_assert(EXAMPLE, tmp_path, macros) == (
        "static_assert: DEDISP_BLOCK_X*DEDISP_BLOCK_Y threads must be 32..1024 (a warp to a block's limit)")


def test_the_committed_brute_force_measured_exactly_the_legal_set():
    """bench/data/dedisp_H200.json.gz (bench/brute_force.py on an H200): every point the tool calls
    legal checked and timed, nothing else, none failed."""
    space = load_space(EXAMPLE / "space.yaml")
    cache = json.loads(gzip.open(ROOT / "bench" / "data" / "dedisp_H200.json.gz").read())
    names = [p.macro for p in space.swept]
    assert cache["tune_params_keys"] == names and cache["device_name"] == "NVIDIA H200"
    assert cache["kernel_name"] == "dedisp_kernel" and cache["problem_size"] == [8192, 2048, 256]
    assert set(cache["cache"]) == {",".join(str(p[n]) for n in names) for p in legal_points(space)}
    times = {key: e["time"] for key, e in cache["cache"].items()}
    assert all(isinstance(t, float) and t > 0 for t in times.values())
    assert min(times, key=times.get) == ",".join(str(OPTIMUM_H200[n]) for n in names)
