"""examples/dedisp on a GPU: the program checks its kernel (every output equal to the reference's)
for the default configuration and one with uneven tiles, strides and edges, then times it and
writes the events JSON a sweep reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.conf_build import built, checked_then_timed
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dedisp"
pytestmark = needs_nvcc

# TILE_X 3 and TILE_Y 5 divide no size below, so the edge tiles are partial; both strides on.
UNEVEN = {"DEDISP_BLOCK_X": 8, "DEDISP_BLOCK_Y": 40, "DEDISP_TILE_X": 3, "DEDISP_TILE_Y": 5,
          "DEDISP_STRIDE_X": 1, "DEDISP_STRIDE_Y": 1}


@pytest.mark.parametrize("macros, args, grid, block", [
    (None, [], [1024, 16, 1], [4, 64, 1]),
    (UNEVEN, ["--samples", "1000", "--dms", "300", "--channels", "64"], [42, 2, 1], [8, 40, 1]),
], ids=["default", "uneven"])
def test_the_program_checks_its_kernel_then_times_it_and_writes_the_events_json(tmp_path, macros, args, grid, block):
    kernel = checked_then_timed(built(EXAMPLE, tmp_path, macros) / "dedisp", args, tmp_path, "GB/s")
    assert kernel["kernel"] == "dedisp_kernel" and kernel["grid"] == grid and kernel["block"] == block
