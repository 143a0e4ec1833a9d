"""examples/expdist (the Gaussian overlap of two point clouds in double precision, the shape of
the community's expdist space): its space file counts 9,120 legal points with the tool's own
enumeration, the kernel builds with real nvcc from conf.cuh's macros, the program refuses a bad
problem before it touches a GPU, and an illegal configuration stops at the static_assert that
names its rule (a sweep records it as skipped). Running it needs a GPU
(tests/gpu/test_expdist_gpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.plan.learned import legal_points
from sweep.space import check, default_config, load_space
from tests.examples.conf_build import (kernel_symbols, make_with_conf, refused_at_static_assert,
                                       refused_before_cuda)
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "expdist"


def test_the_space_counts_9120_legal_points_with_blocks_per_column_only_for_the_column_kernel():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.size() == (40_000, "5*5*5*4*5*2*2*4") and space.strategy.name == "learning"
    points = legal_points(space)
    assert len(points) == 9_120 and check(space, default_config(space)) is None
    assert all(p["EXPDIST_Y_BLOCKS"] == 1 for p in points if p["EXPDIST_COLUMN"] == 0)
    assert {p["EXPDIST_Y_BLOCKS"] for p in points if p["EXPDIST_COLUMN"] == 1} == {1, 4, 16, 64}
    assert all(p["EXPDIST_TILE_X"] % p["EXPDIST_UNROLL_X"] == 0 for p in points)
    assert {p["EXPDIST_BLOCK_X"] * p["EXPDIST_BLOCK_Y"] for p in points} == {32, 64, 128, 256, 512, 1024}


@needs_nvcc
def test_the_default_configuration_builds_for_sm_90_and_refuses_a_bad_problem(tmp_path):
    p = make_with_conf(EXAMPLE, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if (symbols := kernel_symbols(tmp_path / "build" / "expdist", demangle=True)) is not None:
        assert "expdist_kernel<32, 4, 1, 1, 1, 0, 0, 1>" in symbols
    refused_before_cuda(tmp_path / "build" / "expdist", ["--size", "16385,64"], "need --size M,N with each 1..16384")


@needs_nvcc
@pytest.mark.parametrize("macros, why", [
    ({"EXPDIST_TILE_X": 3, "EXPDIST_UNROLL_X": 2}, "static_assert: EXPDIST_UNROLL_X must divide EXPDIST_TILE_X"),
    ({"EXPDIST_Y_BLOCKS": 16}, "static_assert: EXPDIST_Y_BLOCKS must be 1 unless EXPDIST_COLUMN is 1"),
], ids=["unroll-not-dividing", "blocks-per-column-without-columns"])
def test_an_illegal_configuration_stops_at_the_static_assert_naming_its_rule(tmp_path, macros, why):
    reason = refused_at_static_assert(EXAMPLE, tmp_path, macros)
    assert reason.startswith(why), reason
