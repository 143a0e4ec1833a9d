"""The own matmul's split-K choice (matmul_split_k_for in kernels/matmul.cuh), run
on the CPU through a host-only program built with real nvcc. The expected counts
are the ones matmul_tiles measured fastest on GPT-2's linear layers (B*T = 4096)
with 128x128x32 tiles: split 2 only where 192 tiles meet 132 SMs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host_programs import build_host_program
from tests.conftest import needs_nvcc


pytestmark = needs_nvcc

# What cudaDeviceGetAttribute reports: SMs, SM clock kHz, memory clock kHz, bus bits, compute capability.
H100_SXM = (132, 1980000, 2619000, 5120, 9, 0)
A100_SXM = (108, 1410000, 1593000, 5120, 8, 0)
TILES = (128, 128, 32)


@pytest.fixture(scope="module")
def split_k_picks(tmp_path_factory) -> Path:
    return build_host_program(tmp_path_factory, "split_k_picks")


def pick(exe: Path, device: tuple, M: int, N: int, K: int, tiles: tuple = TILES) -> int:
    out = subprocess.run([str(exe), *map(str, (*device, *tiles, M, N, K))], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.parametrize("shape, splits", [
    ((4096, 2304, 768), 1),    # 576 tiles: 4.4 per SM, whole tiles beat the extra traffic
    ((4096, 768, 768), 2),     # 192 tiles: the busiest SM does 2, split it does 1.5 (measured +14%)
    ((4096, 3072, 768), 1),
    ((4096, 768, 3072), 2),    # measured +26% over unsplit
    ((4096, 50257, 768), 1),   # the LM head: 12,576 tiles
], ids=["qkv", "attn-proj", "fc", "fc-proj", "lm-head"])
def test_split_k_model_picks_what_was_measured_fastest_on_gpt2_shapes(split_k_picks, shape, splits):
    assert pick(split_k_picks, H100_SXM, *shape) == splits


def test_split_k_model_splits_a_short_prompt_across_the_whole_gpu(split_k_picks):
    # 64 tokens: 18 tiles for qkv, 6 for the MLP projection; splitting K lets every SM work.
    assert pick(split_k_picks, H100_SXM, 64, 2304, 768) > 4
    assert pick(split_k_picks, H100_SXM, 64, 768, 3072) > 12


def test_split_k_model_leaves_every_slice_at_least_four_bk_slices_deep(split_k_picks):
    assert pick(split_k_picks, H100_SXM, 64, 768, 100) == 1           # K = 100 < 4 * BK: nothing to split
    assert pick(split_k_picks, H100_SXM, 64, 768, 256) == 2           # at most 256 / (4 * 32) slices


def test_split_k_model_weighs_the_device_it_is_given(split_k_picks):
    # An A100 (108 SMs, 64 FP32 lanes each) has more compute time per byte moved: the MLP projection splits further.
    assert pick(split_k_picks, A100_SXM, 4096, 768, 3072) > pick(split_k_picks, H100_SXM, 4096, 768, 3072)


def test_split_k_model_without_memory_rates_splits_only_grids_smaller_than_the_gpu(split_k_picks):
    no_memory = (132, 1980000, 0, 0, 9, 0)
    assert pick(split_k_picks, no_memory, 4096, 768, 3072) == 1       # 192 tiles >= 132 SMs
    assert pick(split_k_picks, no_memory, 64, 2304, 768) > 1          # 18 tiles


def test_split_k_model_never_splits_without_a_compute_rate(split_k_picks):
    assert pick(split_k_picks, (132, 0, 0, 0, 9, 0), 64, 2304, 768) == 1
