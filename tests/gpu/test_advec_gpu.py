"""examples/advec on a GPU: the program checks its kernel (every cell and ghost cell against the
reference, the reference itself against the CPU on a small grid) for the default configuration
and for tiled ones, strided and not, at a size no tile divides, then times it and writes the
events JSON a sweep reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.conf_build import built, checked_then_timed
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "advec"
pytestmark = needs_nvcc


def config(bx: int, by: int, bz: int, tx: int, ty: int, tz: int, st: int, mb: int) -> dict[str, int]:
    return {"ADVEC_BLOCK_X": bx, "ADVEC_BLOCK_Y": by, "ADVEC_BLOCK_Z": bz, "ADVEC_TILE_X": tx, "ADVEC_TILE_Y": ty,
            "ADVEC_TILE_Z": tz, "ADVEC_STRIDED": st, "ADVEC_MIN_BLOCKS": mb}


# 61 x 37 x 13 cells: every tiled grid has partial tiles on three edges.
@pytest.mark.parametrize("macros, args, grid, block", [
    (None, [], [16, 128, 64], [32, 4, 1]),
    (config(64, 2, 2, 2, 4, 1, 0, 2), ["--size", "61,37,13"], [1, 5, 7], [64, 2, 2]),
    (config(32, 8, 4, 1, 2, 4, 1, 1), ["--size", "61,37,13"], [2, 3, 1], [32, 8, 4]),
    (config(256, 1, 1, 4, 1, 2, 1, 4), ["--size", "61,37,13"], [1, 37, 7], [256, 1, 1]),
], ids=["default", "adjacent-cells", "largest-block", "strided-min-blocks"])
def test_the_program_checks_its_kernel_then_times_it_and_writes_the_events_json(tmp_path, macros, args, grid, block):
    kernel = checked_then_timed(built(EXAMPLE, tmp_path, macros) / "advec", args, tmp_path, "G cells/s")
    assert kernel["kernel"] == "advec_kernel" and kernel["grid"] == grid and kernel["block"] == block
