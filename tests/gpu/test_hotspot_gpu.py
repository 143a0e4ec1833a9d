"""examples/hotspot on a GPU: the program checks its kernel (every cell after 60 steps within
1e-3 of the one-step-per-launch reference's, the reference itself against the CPU on a small
grid) for the default configuration and for temporally tiled ones at a size no tile divides,
then times it and writes the events JSON a sweep reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.conf_build import built, checked_then_timed
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hotspot"
pytestmark = needs_nvcc


def config(bx: int, by: int, tx: int, ty: int, tt: int, u: int, sh: int) -> dict[str, int]:
    return {"HOTSPOT_BLOCK_X": bx, "HOTSPOT_BLOCK_Y": by, "HOTSPOT_TILE_X": tx, "HOTSPOT_TILE_Y": ty,
            "HOTSPOT_TEMPORAL": tt, "HOTSPOT_UNROLL": u, "HOTSPOT_SH_POWER": sh}


# 1,001 x 777 cells: every tiled grid has partial tiles on its right and bottom edges.
@pytest.mark.parametrize("macros, args, grid, block", [
    (None, [], [64, 256, 1], [32, 8, 1]),
    (config(64, 4, 2, 3, 5, 5, 1), ["--size", "1001,777"], [8, 65, 1], [64, 4, 1]),
    (config(16, 2, 4, 4, 10, 2, 0), ["--size", "1001,777"], [16, 98, 1], [16, 2, 1]),
    (config(512, 1, 1, 2, 2, 2, 1), ["--size", "1001,777"], [2, 389, 1], [512, 1, 1]),
], ids=["default", "tt5-shared-power", "tt10-global-power", "wide-block"])
def test_the_program_checks_its_kernel_then_times_it_and_writes_the_events_json(tmp_path, macros, args, grid, block):
    kernel = checked_then_timed(built(EXAMPLE, tmp_path, macros) / "hotspot", args, tmp_path, "G cell-steps/s")
    assert kernel["kernel"] == "hotspot_kernel" and kernel["grid"] == grid and kernel["block"] == block
