"""examples/stencil_cmake on a GPU: its events JSON (examples/common/engine_timing.cuh) holds an
entry per kernel and launch shape, with calls per iteration and a total per iteration, as the
events backend reads it; and it refuses --nvtx (it opens no NVTX range)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sweep.profile import events
from tests.examples.conf_build import built
from tests.conftest import needs_nvcc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stencil_cmake"
pytestmark = needs_nvcc


def test_the_events_json_has_an_entry_per_kernel_and_shape_with_its_calls_per_iteration(tmp_path):
    exe = built(EXAMPLE, tmp_path) / "stencil"
    out = tmp_path / "events.json"
    p = subprocess.run([str(exe), "--sizes", "130,258", "--sweeps", "4", "--iters", "3",
                        "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "check: ok (3 sizes)" in p.stdout
    text = out.read_text()
    found = {(m.kernel, m.grid, m.block): m for m in events.parse_json(text)}
    # default launch sizes (stencil.cuh): a 32x8 block, residual blocks of 256; the residual sum has one
    # shape at every size, so its calls of both sizes share one entry (2 calls an iteration)
    assert sorted((k, c.calls) for (k, _, _), c in found.items()) == [
        ("jacobi_kernel", 4), ("jacobi_kernel", 4), ("residual_partial_kernel", 1),
        ("residual_partial_kernel", 1), ("residual_sum_kernel", 2)]
    assert all(len(m.iter_total_ns) == 3 and min(m.iter_total_ns) > 0 for m in found.values())
    for m in found.values():       # an iteration's total is its calls' times: calls x a call's time, roughly
        assert m.min_ns * m.calls <= m.total_median_ns <= m.max_ns * m.calls
    forward = events.forward_ms(text)
    assert forward["median_ms"] * 1e6 == pytest.approx(sum(m.total_median_ns for m in found.values()), rel=0.5)
    refused = subprocess.run([str(exe), "--nvtx"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "unknown or incomplete argument '--nvtx'" in refused.stderr
