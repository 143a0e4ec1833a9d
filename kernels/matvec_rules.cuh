// matvec_rules.cuh: the decoding matvec's shape and argument rules, apart from its
// kernels: how many float4s of W a lane loads first, where a warp LayerNorms its row,
// how many warps share a column, where the LayerNorm and the attention fold in, and
// which arguments the launcher takes. Host functions (and two constexpr ones the
// kernel uses too), no kernel and no CUDA call, so host-only programs pin them on the
// CPU (tests/kernels: matvec_split_picks.cu, decode_policy.cu). No launch sizes.
// It defines two functions launchers.h declares (matvec_decode_folds_layernorm,
// matvec_decode_attends), so one translation unit of a program includes it: the
// matvec unit's (through matvec.cuh), or a test program's own.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdio>

#include "attention_row.cuh"
#include "types.h"

// float4s of W a lane of the decoding matvec loads before it reads A: with the LayerNorm,
// all of a K of 768 at one warp a column (GPT-2 124M's qkv, fc and LM head), so no load
// waits behind it (LM head 58.5 -> 52.1 us, the copy bandwidth, on an H100); else all of K
// at the splits matvec_split_for gives the other layers.
__host__ __device__ constexpr int matvec_preloads(bool layernorm) { return layernorm ? 6 : 4; }

// Whether the decoding matvec LayerNorms its one row in each warp (matvec_normalized_dot):
// one warp a column whose lanes hold all of K in their preloaded float4s of W.
__host__ __device__ constexpr bool matvec_warp_norm(int M, int K, int split) {
    return M == 1 && split == 1 && K <= 128 * matvec_preloads(true);
}

// Whether the decoding matvec built for epilogue `e` stores k and v into the cache and runs
// the attention tail (KVWrite): the qkv layer's build, whose epilogue is the bias alone. The
// other builds carry none of that code (it cost the LM head's registers: it spilled), and
// the launcher refuses a KVWrite with them.
__host__ __device__ constexpr bool matvec_writes_kv(Epilogue e) { return e == Epilogue::Bias; }

// Whether the decoding matvec built for epilogue `e` picks the next token in its blocks
// (TokenPick, token_pick.cuh): the LM head's build, whose epilogue is none. As with the
// KV-cache write, the other builds carry none of that code and the launcher refuses a
// TokenPick with them.
__host__ __device__ constexpr bool matvec_picks_token(Epilogue e) { return e == Epilogue::None; }

// How many warps share one output column in the decoding matvec (a divisor of
// the block's `block_warps`): the fewest that give N * split >= half the warps
// the GPU holds of this kernel at once (sms * warps_per_sm / 2, warps_per_sm the
// kernel's own occupancy, not the device's most), so every SM has loads in
// flight while the blocks stay one wave; no more than leave each lane at least
// one float4 of K (split <= K / 128), else the largest such. Half, not all,
// the resident warps: a lane already keeps up to four float4s in flight, and a
// grid of one wave has no tail, where a second wave of a few blocks doubles a
// few-microsecond kernel. On an H100 (132 SMs) at 8 warps a block, the build
// without the LayerNorm holds 48 warps an SM (40 registers: target 3168) and
// the one with it 24 (80 registers: 1584), which gives GPT-2 124M's decoding
// layers: qkv (2304 x 768, LayerNorm) 1, attention projection (768 x 768) 4, fc
// (3072 x 768, LayerNorm) 1, MLP projection (768 x 3072) 8, LM head (50257 x
// 768, LayerNorm) 1. Plain numbers, so tests check it without a GPU
// (tests/kernels/matvec_split_picks.cu).
inline int matvec_split_for(int sms, int warps_per_sm, int block_warps, long long N, int K) {
    const long long target = (long long)std::max(sms, 1) * std::max(warps_per_sm, 1) / 2;
    const int cap = std::max(1, K / 128);
    int best = 1;
    for (int s = 1; s <= block_warps && s <= cap; ++s) {
        if (block_warps % s) continue;
        best = s;
        if (N * s >= target) break;
    }
    return best;
}

// Whether a LayerNorm of M rows of K fits the decoding matvec's shared memory
// (the default 48 KB: M * K floats); if not, the caller runs layernorm first.
bool matvec_decode_folds_layernorm(int M, int K) { return (size_t)M * K * sizeof(float) <= 48 * 1024; }

// Whether a decoding step runs its attention in the qkv matvec's tail (KVWrite::attention)
// rather than as attention_decode_split_kernel: the LayerNorm is folded in (the tail is
// built with it), the head fits attention_row, and the context is at most
// MATVEC_ATTENTION_MAX_KEYS positions, where one block per head walking every key ends
// sooner than the split kernel's launch and its chunks' combine.
// On an H100 (GPT-2 124M, 64 steps a run): fused 5% faster at 73 positions, 2% at 185,
// 4.5% slower at 245 (gpt2_generate --decode-attention).
constexpr int MATVEC_ATTENTION_MAX_KEYS = 192;
bool matvec_decode_attends(int M, int C, int heads, int maxT) {
    return heads > 0 && C % heads == 0 && matvec_decode_folds_layernorm(M, C) && attention_row_supports(C / heads) &&
           maxT <= MATVEC_ATTENTION_MAX_KEYS;
}

// Whether the decoding matvec takes these arguments (`rows` its MATVEC_MAX_ROWS, `block_warps`
// its block's warps, `split` 0 or the warps forced onto a column, `pick` the LM head's token
// pick); else one line on stderr says why. Host only, no CUDA call: tests/kernels/decode_policy.cu pins it on the CPU.
inline bool matvec_splitk_accepts(Epilogue e, const float* bias, int M, int rows, int N, int K, int split, int block_warps,
                                  const RowNorm& ln, const KVWrite& kv, const TokenPick& pick = {}) {
    if (M > rows) { fprintf(stderr, "matvec_splitk: M=%d rows, over MATVEC_MAX_ROWS=%d\n", M, rows); return false; }
    if (e != Epilogue::None && !bias) { fprintf(stderr, "matvec_splitk: a bias epilogue needs a bias\n"); return false; }
    const bool norm = ln.weight != nullptr;
    if (norm && (!ln.bias || !matvec_decode_folds_layernorm(M, K))) {
        fprintf(stderr, "matvec_splitk: a LayerNorm of %d rows of %d needs a bias and at most 48 KB of shared memory\n", M, K);
        return false;
    }
    if (kv.k && (!kv.v || !kv.pos || kv.heads <= 0 || N % 3 || (N / 3) % kv.heads)) {
        fprintf(stderr, "matvec_splitk: a KV-cache write needs both caches, a position and N = 3 x heads x head size (N=%d, heads=%d)\n",
                N, kv.heads);
        return false;
    }
    if (kv.k && !matvec_writes_kv(e)) {
        fprintf(stderr, "matvec_splitk: a KV-cache write is the qkv layer's, whose epilogue is the bias alone\n");
        return false;
    }
    const int head_size = kv.heads > 0 ? N / 3 / kv.heads : 0;
    if (kv.attention && (!kv.k || !kv.counters || !norm || !attention_row_supports(head_size))) {
        fprintf(stderr, "matvec_splitk: attention in the qkv matvec needs the KV-cache write, per-head counters, the LayerNorm "
                        "folded in and a head size of at most %d (head size %d)\n", 32 * ATTENTION_ROW_DIMS, head_size);
        return false;
    }
    if (pick.best && (!pick.next_token || !pick.pos || !matvec_picks_token(e))) {
        fprintf(stderr, "matvec_splitk: the token pick is the LM head's, whose epilogue is none, and needs its next token "
                        "and position\n");
        return false;
    }
    if (split > 0 && block_warps % split) {
        fprintf(stderr, "matvec_splitk: split %d does not divide the block's %d warps\n", split, block_warps);
        return false;
    }
    return true;
}
