"""The decoding step's shape rules (kernels/matvec_rules.cuh), run on the CPU through a host-only
program built with real nvcc: where the qkv matvec runs the layer's attention in its tail
(matvec_decode_attends: the LayerNorm folded in, a head of at most 128, at most
MATVEC_ATTENTION_MAX_KEYS = 192 positions, where the H100 measured it faster) and where
each warp LayerNorms the one row itself (matvec_warp_norm); and which arguments the decoding
matvec's launcher takes (matvec_splitk_accepts): a KV-cache write only with the qkv layer's
bias epilogue, the one build that carries its stores and the attention tail, and the token pick
only with the LM head's epilogue (none), the one build that carries it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host_programs import build_host_program
from tests.conftest import needs_nvcc


pytestmark = needs_nvcc


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


def accepts(exe: Path, epilogue: str, kv: bool, attention: bool, pick: bool = False) -> tuple[bool, str]:
    out = subprocess.run([str(exe), "accepts", epilogue, str(int(kv)), str(int(attention)), str(int(pick))],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip() == "1", out.stderr.strip()


@pytest.mark.parametrize("epilogue", ["none", "bias", "gelu", "residual"])
def test_every_epilogue_is_taken_without_a_kv_cache_write(decode_policy, epilogue):
    assert accepts(decode_policy, epilogue, kv=False, attention=False) == (True, "")


def test_the_qkv_layers_bias_epilogue_takes_the_kv_cache_write_and_the_attention(decode_policy):
    assert accepts(decode_policy, "bias", kv=True, attention=False) == (True, "")
    assert accepts(decode_policy, "bias", kv=True, attention=True) == (True, "")


@pytest.mark.parametrize("epilogue", ["none", "gelu", "residual"])
def test_a_kv_cache_write_with_another_epilogue_is_refused_in_one_line(decode_policy, epilogue):
    ok, why = accepts(decode_policy, epilogue, kv=True, attention=False)
    assert not ok
    assert why == "matvec_splitk: a KV-cache write is the qkv layer's, whose epilogue is the bias alone"


def test_the_attention_without_the_kv_cache_write_is_refused(decode_policy):
    ok, why = accepts(decode_policy, "bias", kv=False, attention=True)
    assert not ok and "needs the KV-cache write" in why


def test_the_lm_heads_epilogue_takes_the_token_pick(decode_policy):
    assert accepts(decode_policy, "none", kv=False, attention=False, pick=True) == (True, "")


@pytest.mark.parametrize("epilogue", ["bias", "gelu", "residual"])
def test_a_token_pick_with_another_epilogue_is_refused_in_one_line(decode_policy, epilogue):
    ok, why = accepts(decode_policy, epilogue, kv=False, attention=False, pick=True)
    assert not ok
    assert why == ("matvec_splitk: the token pick is the LM head's, whose epilogue is none, and needs its next token "
                   "and position")
