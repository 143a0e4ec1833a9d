// types.h: the small enums shared by kernel families, launchers.h and the model.
#pragma once

// What follows a matmul, per output element: + bias[col], then gelu, or + residual.
enum class Epilogue { None, Bias, BiasGelu, BiasResidual };

// Which matmul the model calls (programs' --matmul): Own the SIMT kernel, Tf32x3 the tensor cores at FP32
// accuracy (the default), Tiled the textbook kernel, Cublas cuBLAS SGEMM (the reference).
enum class MatmulImpl { Own, Tiled, Cublas, Tf32x3 };

// A LayerNorm the decoding matvec applies to its input rows as it stages them in
// shared memory (weight nullptr: the rows are used as they are).
struct RowNorm {
    const float* weight = nullptr;
    const float* bias = nullptr;
    float eps = 1e-5f;
};

// Where argmax's blocks leave their bests: value and index [B][ARGMAX_MAX_BLOCKS], and
// counters [B + 1] (per row, then rows done) that pick the block finishing a row and the
// one finishing the launch; they start at zero and every launch leaves them there.
struct ArgmaxScratch {
    float* value = nullptr;
    int* index = nullptr;
    unsigned int* counters = nullptr;
};

// Where the decoding QKV matvec also stores the k and v thirds of its output (k
// nullptr: nowhere): this layer's caches, (B, heads, maxT, C / heads), at position *pos.
// With `attention` too, the block that completes a head's q, k and v columns (counted
// in `counters`, one per head, zero before and after every launch) then runs that
// head's attention over positions 0..*pos into attention (B, C): no attention kernel.
struct KVWrite {
    float* k = nullptr;
    float* v = nullptr;
    const int* pos = nullptr;
    int heads = 0, maxT = 0;
    float* attention = nullptr;
    unsigned int* counters = nullptr;
};

// Where the decoding LM head's matvec also picks each row's next token (best nullptr:
// it does not; argmax_kernel picks then): its blocks fold their columns' logits into
// best[row], one packed (value, index) maximum a row (token_pick.cuh); token_pick_kernel
// then writes next_token and sequence[row * maxT + *pos + 1], moves *pos on and leaves
// best at zero, where it starts.
struct TokenPick {
    unsigned long long* best = nullptr;
    int* next_token = nullptr;
    int* sequence = nullptr;
    int* pos = nullptr;
    int maxT = 0;
};

// How a decoding step attends: in the qkv matvec's tail where the context is short
// (matvec_decode_attends), else the split kernel; or forced either way (kernel_check,
// gpt2_generate --decode-attention).
enum class DecodeAttention { Auto, Fused, Split };
