"""examples/pnpoly on a GPU: the program checks its kernel (every point's answer equal to the
double-precision reference's, where the reference is sure of it) for the default configuration
and for tiled ones written each other way, then times it and writes the events JSON a sweep
reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.conf_build import built, checked_then_timed
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pnpoly"
pytestmark = needs_nvcc

# 1,000,003 points leave every tiled block's last points past the end; each of the other forms.
TILED = [{"PNPOLY_BLOCK_X": b, "PNPOLY_TILE": t, "PNPOLY_BETWEEN": bt, "PNPOLY_SLOPES": s, "PNPOLY_METHOD": m}
         for b, t, bt, s, m in ((96, 6, 1, 1, 1), (1024, 20, 2, 0, 2), (32, 18, 3, 1, 0))]


@pytest.mark.parametrize("macros, args, grid, block", [
    (None, [], [16384, 1, 1], [256, 1, 1]),
    (TILED[0], ["--points", "1000003"], [1737, 1, 1], [96, 1, 1]),
    (TILED[1], ["--points", "1000003"], [49, 1, 1], [1024, 1, 1]),
    (TILED[2], ["--points", "1000003"], [1737, 1, 1], [32, 1, 1]),
], ids=["default", "tiled-xor", "tiled-count", "tiled-branch"])
def test_the_program_checks_its_kernel_then_times_it_and_writes_the_events_json(tmp_path, macros, args, grid, block):
    kernel = checked_then_timed(built(EXAMPLE, tmp_path, macros) / "pnpoly", args, tmp_path, "point-edge tests/s")
    assert kernel["kernel"] == "pnpoly_kernel" and kernel["grid"] == grid and kernel["block"] == block
