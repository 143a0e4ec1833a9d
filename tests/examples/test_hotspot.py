"""examples/hotspot (a thermal simulation with temporal tiling, the shape of the community's
hotspot space): its space file counts 7,949 legal points with the tool's own enumeration, the
kernel builds with real nvcc from conf.cuh's macros, the program refuses a bad grid before it
touches a GPU, and an illegal configuration stops at the static_assert that names its rule (a
sweep records it as skipped). Running it needs a GPU (tests/gpu/test_hotspot_gpu.py)."""

from __future__ import annotations

from pathlib import Path

from sweep.plan.learned import legal_points
from sweep.space import check, default_config, load_space
from tests.examples.conf_build import (kernel_symbols, make_with_conf, refused_at_static_assert,
                                       refused_before_cuda)
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hotspot"


def test_the_space_counts_7949_legal_points_each_within_the_shared_memory_of_a_block():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.size() == (40_320, "6*6*4*4*7*5*2") and space.strategy.name == "learning"
    points = legal_points(space)
    assert len(points) == 7_949 and check(space, default_config(space)) is None
    widest = max(points, key=lambda p: p["HOTSPOT_BLOCK_X"] * p["HOTSPOT_TILE_X"])
    # 512 x 4 cells wide: (2,048 + 2) x (1 + 2) cells, two buffers, 49,200 bytes: over by 48
    assert widest["HOTSPOT_BLOCK_X"] * widest["HOTSPOT_TILE_X"] == 1536
    assert all(p["HOTSPOT_TEMPORAL"] % p["HOTSPOT_UNROLL"] == 0 for p in points)


@needs_nvcc
def test_the_default_configuration_builds_for_sm_90_and_refuses_a_bad_grid(tmp_path):
    p = make_with_conf(EXAMPLE, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if (symbols := kernel_symbols(tmp_path / "build" / "hotspot", demangle=True)) is not None:
        assert "hotspot_kernel<32, 8, 1, 1, 1, 1, 0>" in symbols
    refused_before_cuda(tmp_path / "build" / "hotspot", ["--size", "0,64"], "need --size W,H with each 1..16384")


@needs_nvcc
def test_a_tile_too_large_for_shared_memory_stops_at_the_static_assert_naming_its_rule(tmp_path):
    macros = {"HOTSPOT_BLOCK_X": 512, "HOTSPOT_BLOCK_Y": 2, "HOTSPOT_TILE_X": 4, "HOTSPOT_TILE_Y": 4,
              "HOTSPOT_TEMPORAL": 10, "HOTSPOT_UNROLL": 5, "HOTSPOT_SH_POWER": 1}
    why = refused_at_static_assert(EXAMPLE, tmp_path, macros)
    assert why.startswith("static_assert: (HOTSPOT_BLOCK_X * HOTSPOT_TILE_X")
    assert why.endswith("must fit in 48 KB of shared memory")
