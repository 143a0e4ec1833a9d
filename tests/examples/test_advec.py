"""examples/advec (the advection tendency of u in a large-eddy simulation, the shape of the
community's microhh space): its space file counts 5,670 legal points with the tool's own
enumeration, the kernel builds with real nvcc from conf.cuh's macros, the program refuses a bad
grid before it touches a GPU, and an illegal configuration stops at the static_assert that names
its rule (a sweep records it as skipped). Running it needs a GPU (tests/gpu/test_advec_gpu.py)."""

from __future__ import annotations

from pathlib import Path

from sweep.plan.learned import legal_points
from sweep.space import check, default_config, load_space
from tests.examples.conf_build import (kernel_symbols, make_with_conf, refused_at_static_assert,
                                       refused_before_cuda)
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "advec"


def test_the_space_counts_5670_legal_points_whose_blocks_an_sm_can_hold():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.size() == (7_776, "4*4*3*3*3*3*2*3") and space.strategy.name == "learning"
    points = legal_points(space)
    assert len(points) == 5_670 and check(space, default_config(space)) is None
    threads = [p["ADVEC_BLOCK_X"] * p["ADVEC_BLOCK_Y"] * p["ADVEC_BLOCK_Z"] for p in points]
    assert min(threads) == 32 and max(threads) == 1024
    assert max(t * p["ADVEC_MIN_BLOCKS"] for t, p in zip(threads, points)) == 2048


@needs_nvcc
def test_the_default_configuration_builds_for_sm_90_and_refuses_a_bad_grid(tmp_path):
    p = make_with_conf(EXAMPLE, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if (symbols := kernel_symbols(tmp_path / "build" / "advec", demangle=True)) is not None:
        assert "advec_kernel<32, 4, 1, 1, 1, 1, 1, 1>" in symbols
    refused_before_cuda(tmp_path / "build" / "advec", ["--size", "64,64"], "need --size I,J,K with each 1..1024")


@needs_nvcc
def test_more_blocks_than_an_sm_holds_stop_at_the_static_assert_naming_its_rule(tmp_path):
    macros = {"ADVEC_BLOCK_X": 256, "ADVEC_BLOCK_Y": 4, "ADVEC_MIN_BLOCKS": 4}
    why = refused_at_static_assert(EXAMPLE, tmp_path, macros)
    assert why.startswith("static_assert: ADVEC_BLOCK_X * ADVEC_BLOCK_Y * ADVEC_BLOCK_Z * "
                                                "ADVEC_MIN_BLOCKS must be at most 2048"), why
