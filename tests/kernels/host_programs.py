"""Shared by the tests of the kernels' host-side rules: building a host-only program."""

from __future__ import annotations

import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parents[1] / "kernels"


def build_host_program(tmp_path_factory, source: str) -> Path:
    """tests/kernels/<source>.cu built with real nvcc against kernels/ (no GPU needed to run it)."""
    exe = tmp_path_factory.mktemp(source) / source
    p = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", f"-I{KERNELS}", str(HERE / f"{source}.cu"), "-o", str(exe)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return exe
