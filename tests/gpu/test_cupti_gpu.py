"""The CUPTI backend end to end on a GPU: build the injection library and
examples/tiled_gemm here, run it under the library, parse what it wrote."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


from sweep.profile import cupti



def run_under(lib: Path, capture: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **cupti.environment(lib, capture)}
    return subprocess.run([str(args[0]), *args[1:]], env=env, capture_output=True, text=True, timeout=120)


def test_a_run_under_the_library_gives_one_measurement_per_launch_shape_and_iteration(tiled_gemm, tmp_path):
    lib, exe = tiled_gemm
    p = run_under(lib, tmp_path / "c.txt", exe, "--nvtx", "--iters", "5", "--warmup", "1")
    assert p.returncode == 0, p.stderr
    got = cupti.parse(tmp_path / "c.txt")
    assert got.complete and got.iterations == 5 and got.counted == 15
    assert {m.grid for m in got.measurements} == {(4, 4, 1), (8, 8, 1), (16, 16, 1)}
    assert all(m.kernel == "gemm_tiled_kernel" and m.calls == 1 and m.median_ns > 0 for m in got.measurements)


def test_a_crashing_run_leaves_the_iterations_finished_before_the_crash(tiled_gemm, tmp_path):
    lib, exe = tiled_gemm
    p = run_under(lib, tmp_path / "c.txt", exe, "--nvtx", "--iters", "10", "--crash-after", "3")
    assert p.returncode != 0
    got = cupti.parse(tmp_path / "c.txt")
    assert not got.complete and got.signal == 6
    assert got.iterations == 3 and got.unclosed_ranges == 1


def test_a_run_under_the_library_places_its_iterations_on_the_wall_clock_inside_the_run(tiled_gemm, tmp_path):
    """The library's clock pairs map CUPTI's times onto CLOCK_REALTIME, where sweep.node.clocks stamps its readings."""
    lib, exe = tiled_gemm
    before = time.time_ns()
    p = run_under(lib, tmp_path / "c.txt", exe, "--nvtx", "--iters", "5", "--warmup", "1", "--pause-ms", "20")
    after = time.time_ns()
    assert p.returncode == 0, p.stderr
    got = cupti.parse(tmp_path / "c.txt")
    assert len(got.windows) == 5
    assert before < got.windows[0][0] and got.windows[-1][1] < after
    assert all(a[1] <= b[0] and b[0] - a[0] > 15_000_000 for a, b in zip(got.windows, got.windows[1:]))   # the pauses
