"""docs/guide/events-json.md stays true to the parser: its JSON example is read by the events
backend as documented, and its example program compiles (slow: real nvcc)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from sweep.profile import events
from tests.conftest import needs_nvcc

DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "events-json.md"


def block(lang: str) -> str:
    return re.search(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S).group(1)


def test_the_documented_json_parses_into_one_measurement_and_the_iteration_time():
    (m,) = events.parse_json(block("json"))
    assert (m.kernel, m.grid, m.block, m.calls) == ("saxpy_kernel", (4096, 1, 1), (256, 1, 1), 1)
    assert m.iter_total_ns == (12100.0, 11900.0, 13000.0) and m.median_ns == 12100.0
    assert events.forward_ms(block("json"))["median_ms"] == 0.0121


@pytest.mark.slow
@needs_nvcc
def test_the_documented_program_compiles(tmp_path):
    (tmp_path / "saxpy.cu").write_text(block("cuda"))
    p = subprocess.run(["nvcc", "-O3", "-arch=sm_90", "saxpy.cu", "-o", "saxpy"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
