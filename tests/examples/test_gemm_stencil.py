"""examples/gemm_stencil, two examples' kernels in one program: its space holds two parameter
groups that govern different kernels (the GEMM's tiles, the Jacobi kernel's blocks), so `auto`
learns with a model per group; a dry run builds it with real nvcc, each group's macros reaching
its own kernel's template. Running it needs a GPU (tests/gpu/test_gemm_stencil_gpu.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sweep.plan import REGISTRY
from sweep.space import check, groups, load_space, make_config
from tests.conftest import dry_run_narrowed, needs_nvcc
from tests.examples.conf_build import kernel_symbols

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gemm_stencil"

TILES = {"GEMM_BM": 128, "GEMM_BN": 64, "GEMM_BK": 8, "GEMM_TM": 8, "GEMM_TN": 8,
         "STENCIL_BLOCK_X": 64, "STENCIL_BLOCK_Y": 4, "STENCIL_TILE_X": 2, "STENCIL_TILE_Y": 1, "STENCIL_USE_SHARED": 0}


def test_the_space_holds_two_groups_each_governing_its_own_kernel_and_the_rules_of_both_examples():
    space = load_space(EXAMPLE / "space.yaml")
    assert space.size() == (2_500_000, "5*5*5*5*5*5*5*4*4*2") and space.target.verify == "profile"
    assert [sorted({k for p in g for k in p.kernels}) for g in groups(space)] == [["gemm_tiled_kernel"],
                                                                                  ["jacobi_kernel"]]
    assert check(space, make_config(space, TILES)) is None
    assert "48 KB" in check(space, make_config(space, {**TILES, "GEMM_BM": 256, "GEMM_BN": 256, "GEMM_BK": 32}))
    assert "whole warps" in check(space, make_config(space, {**TILES, "STENCIL_BLOCK_X": 16, "STENCIL_BLOCK_Y": 1}))


def test_auto_learns_a_model_per_group_over_the_two_examples_legal_sets():
    space = load_space(EXAMPLE / "space.yaml")
    note = REGISTRY["auto"].search(space).note
    assert note.startswith("auto: 983,968 legal points, over 64: learning: 983,968 legal points; a model per "
                           "parameter group (2: 1,552 x 634 legal)")


@pytest.mark.slow
@needs_nvcc
def test_a_dry_run_builds_each_groups_macros_into_its_own_kernel(tmp_path):
    p, jobs = dry_run_narrowed(EXAMPLE, tmp_path, {m: [v] for m, v in TILES.items()}, strategy="grid")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (job,) = [d for d in (jobs / "gemm-stencil").iterdir() if (d / "build" / "gemm_stencil").is_file()]
    if shutil.which("nm"):
        symbols = kernel_symbols(job / "build" / "gemm_stencil")
        assert "_Z17gemm_tiled_kernelILi128ELi64ELi8ELi8ELi8EEviiiPKfS1_Pf" in symbols
        assert "_Z13jacobi_kernelILi64ELi4ELi2ELi1ELi0EEviPKfS1_Pf" in symbols
