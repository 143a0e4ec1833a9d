"""examples/pnpoly (point in polygon, the shape of the community's pnpoly space): its space file
declares its two enumerations as choices and its switch as a flag and counts 8,448 legal points
with the tool's own enumeration, the kernel builds with real nvcc from conf.cuh's macros, the
program refuses a bad problem size before it touches a GPU, and an illegal configuration stops at
the static_assert that names its rule (a sweep records it as skipped). Running it needs a GPU
(tests/gpu/test_pnpoly_gpu.py)."""

from __future__ import annotations

from pathlib import Path

from sweep.plan.learned import legal_points
from sweep.space import check, default_config, load_space
from tests.examples.conf_build import (kernel_symbols, make_with_conf, refused_at_static_assert,
                                       refused_before_cuda)
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pnpoly"


def test_the_space_counts_8448_legal_points_with_two_choices_and_a_flag():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.size() == (8_448, "32*11*4*2*3") and space.strategy.name == "learning"
    kinds = {p.macro: p.kind for p in space.swept}
    assert kinds == {"PNPOLY_BLOCK_X": "size", "PNPOLY_TILE": "size", "PNPOLY_BETWEEN": "choice",
                     "PNPOLY_SLOPES": "flag", "PNPOLY_METHOD": "choice"}
    assert len(legal_points(space)) == 8_448
    assert check(space, default_config(space)) is None


@needs_nvcc
def test_the_default_configuration_builds_for_sm_90_and_refuses_a_bad_point_count(tmp_path):
    p = make_with_conf(EXAMPLE, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if (symbols := kernel_symbols(tmp_path / "build" / "pnpoly", demangle=True)) is not None:
        assert "pnpoly_kernel<256, 1, 0, 0, 0>" in symbols
    refused_before_cuda(tmp_path / "build" / "pnpoly", ["--points", "0"], "need --points 1..268435456")


@needs_nvcc
def test_an_illegal_configuration_stops_at_the_static_assert_naming_its_rule(tmp_path):
    assert refused_at_static_assert(EXAMPLE, tmp_path, {"PNPOLY_BLOCK_X": 48}) == (
        "static_assert: PNPOLY_BLOCK_X must be a multiple of 32 in 32..1024 (whole warps)")
