"""examples/expdist on a GPU: the program checks its kernel (D within 1e-10 of the reference's,
whose rows are themselves checked against the CPU) for the default configuration and for tiled,
column and partly unrolled ones at a size no tile divides, then times it and writes the events
JSON a sweep reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.conf_build import built, checked_then_timed
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "expdist"
pytestmark = needs_nvcc


def config(bx: int, by: int, tx: int, ty: int, ux: int, sh: int, col: int, yb: int) -> dict[str, int]:
    return {"EXPDIST_BLOCK_X": bx, "EXPDIST_BLOCK_Y": by, "EXPDIST_TILE_X": tx, "EXPDIST_TILE_Y": ty,
            "EXPDIST_UNROLL_X": ux, "EXPDIST_SHARED": sh, "EXPDIST_COLUMN": col, "EXPDIST_Y_BLOCKS": yb}


# 1,001 x 777 points: every tiled grid has partial tiles in both clouds.
@pytest.mark.parametrize("macros, args, grid, block", [
    (None, [], [512, 4096, 1], [32, 4, 1]),
    (config(64, 8, 3, 4, 3, 1, 1, 16), ["--size", "1001,777"], [6, 16, 1], [64, 8, 1]),
    (config(128, 2, 8, 8, 2, 0, 0, 1), ["--size", "1001,777"], [1, 49, 1], [128, 2, 1]),
    (config(512, 2, 2, 8, 1, 1, 1, 64), ["--size", "1001,777"], [1, 64, 1], [512, 2, 1]),
    (config(32, 1, 4, 2, 4, 1, 1, 1), ["--size", "1001,777"], [8, 1, 1], [32, 1, 1]),
], ids=["default", "column-shared", "partial-unroll", "more-blocks-than-rows", "one-column-block"])
def test_the_program_checks_its_kernel_then_times_it_and_writes_the_events_json(tmp_path, macros, args, grid, block):
    kernel = checked_then_timed(built(EXAMPLE, tmp_path, macros) / "expdist", args, tmp_path, "G pairs/s")
    assert kernel["kernel"] == "expdist_kernel" and kernel["grid"] == grid and kernel["block"] == block
