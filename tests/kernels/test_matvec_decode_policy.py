"""The decoding step's shape rules (kernels/matvec.cuh), run on the CPU through a host-only
program built with real nvcc: where the qkv matvec runs the layer's attention in its tail
(matvec_decode_attends: the LayerNorm folded in, a head of at most 128, at most
MATVEC_ATTENTION_MAX_KEYS = 192 positions, where the H100 measured it faster) and where
each warp LayerNorms the one row itself (matvec_warp_norm)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from host_programs import build_host_program


pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


@pytest.fixture(scope="module")
def decode_policy(tmp_path_factory) -> Path:
    return build_host_program(tmp_path_factory, "decode_policy")


def policy(exe: Path, M: int, C: int, heads: int, maxT: int) -> tuple[bool, bool]:
    out = subprocess.run([str(exe), *map(str, (M, C, heads, maxT))], capture_output=True, text=True, check=True)
    attends, warp_norm = out.stdout.split()
    return attends == "1", warp_norm == "1"


@pytest.mark.parametrize("maxT, attends", [(1, True), (73, True), (192, True), (193, False), (1024, False)])
def test_gpt2_124m_attends_in_the_qkv_matvec_up_to_192_positions(decode_policy, maxT, attends):
    assert policy(decode_policy, 1, 768, 12, maxT)[0] is attends


def test_the_attention_is_folded_only_where_its_layernorm_is_and_the_head_fits_a_lane_set(decode_policy):
    assert policy(decode_policy, 16, 768, 12, 73)[0]            # 16 rows of 768: 48 KB, the LayerNorm still folds
    assert not policy(decode_policy, 16, 1024, 16, 73)[0]       # 64 KB: LayerNorm first, so the split kernel attends
    assert policy(decode_policy, 1, 2048, 16, 73)[0]            # head size 128, the widest attention_row takes
    assert not policy(decode_policy, 1, 1600, 10, 73)[0]        # head size 160
    assert not policy(decode_policy, 1, 768, 0, 73)[0]          # no heads: nothing to attend


@pytest.mark.parametrize("M, C, warp_norm", [(1, 768, True), (1, 96, True), (1, 1024, False), (2, 768, False)])
def test_a_warp_layernorms_one_row_of_at_most_768_itself(decode_policy, M, C, warp_norm):
    assert policy(decode_policy, M, C, 12 if C % 12 == 0 else 1, 73)[1] is warp_norm
