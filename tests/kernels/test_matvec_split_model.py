"""The decoding matvec's split choice (matvec_split_for in kernels/matvec_rules.cuh: how
many warps of a block share one output column's K), run on the CPU through a
host-only program built with real nvcc, on GPT-2 124M's decoding shapes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host_programs import build_host_program
from tests.conftest import needs_nvcc


pytestmark = needs_nvcc

# SMs and the warps of the kernel one SM holds at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor,
# which the launcher asks): at 256 threads a block, sm_90's ptxas gives the build without the
# LayerNorm 40 registers (6 blocks, 48 warps) and the one with it 80 (3 blocks, 24 warps).
H100_SXM = (132, 48)
H100_SXM_LAYERNORM = (132, 24)
A100_SXM = (108, 64)
BLOCK_WARPS = 8  # MATVEC_DECODE_BLOCK_SIZE 256


@pytest.fixture(scope="module")
def matvec_split_picks(tmp_path_factory) -> Path:
    return build_host_program(tmp_path_factory, "matvec_split_picks")


def pick(exe: Path, device: tuple, N: int, K: int, block_warps: int = BLOCK_WARPS) -> int:
    out = subprocess.run([str(exe), *map(str, (*device, block_warps, N, K))], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.parametrize("device, shape, split", [
    (H100_SXM_LAYERNORM, (2304, 768), 1),  # qkv: 2304 warps reach the 1584 target (half of 132 x 24) in one wave
    (H100_SXM, (768, 768), 4),             # attention projection: short of 3168 even at 4; 8 would leave lanes without K
    (H100_SXM_LAYERNORM, (3072, 768), 1),  # fc
    (H100_SXM, (768, 3072), 8),            # MLP projection: every warp of the block on one column (6144 warps, one wave)
    (H100_SXM_LAYERNORM, (50257, 768), 1),  # LM head: a warp per column already fills the GPU
], ids=["qkv", "attn-proj", "fc", "fc-proj", "lm-head"])
def test_matvec_split_on_gpt2_decoding_shapes_on_an_h100(matvec_split_picks, device, shape, split):
    assert pick(matvec_split_picks, device, *shape) == split


def test_matvec_split_counts_the_kernels_own_occupancy_not_the_devices_most(matvec_split_picks):
    # qkv's 2 warps a column were 4608 warps: a wave and a tail at 24 or 32 warps an SM, one wave at 64
    assert pick(matvec_split_picks, (132, 64), 2304, 768) == 2
    assert pick(matvec_split_picks, H100_SXM_LAYERNORM, 2304, 768) == 1


def test_matvec_split_keeps_at_least_one_float4_of_k_per_lane(matvec_split_picks):
    assert pick(matvec_split_picks, H100_SXM, 96, 96) == 1          # the odd preset's C=96: K < 128
    assert pick(matvec_split_picks, H100_SXM, 10, 256) == 2         # at most 256 / 128
    assert pick(matvec_split_picks, H100_SXM, 10, 100000, block_warps=32) == 32


def test_matvec_split_only_divides_the_blocks_warps(matvec_split_picks):
    assert pick(matvec_split_picks, H100_SXM, 768, 3072, block_warps=6) == 6    # 1, 2, 3, 6
    assert pick(matvec_split_picks, H100_SXM, 768, 3072, block_warps=5) == 5
    assert pick(matvec_split_picks, H100_SXM, 768, 3072, block_warps=1) == 1


def test_matvec_split_weighs_the_device_it_is_given(matvec_split_picks):
    assert pick(matvec_split_picks, A100_SXM, 768, 3072) == 8
    assert pick(matvec_split_picks, (16, 64), 2304, 768) == 1       # a small GPU: 2304 warps already fill it
    assert pick(matvec_split_picks, (0, 0), 768, 3072) == 1         # no attributes: a target of 0 is met at once
