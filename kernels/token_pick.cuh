// token_pick.cuh: greedy decoding's pick folded into the LM head's matvec
// (matvec.cuh, TokenPick), so a decoding step reads its 50,257 logits back in no
// argmax_kernel. Each block reduces its columns' logits to one packed (value,
// index) key a row in shared memory and folds it into the row's global best with
// one 64-bit atomicMax it does not wait for; one warp after the LM head
// (token_pick_kernel) turns the keys into tokens, as argmax_kernel does at a
// step's end. (The LM head's last block doing that instead, found by a count
// every block waits on after a fence, cost its 6,283 blocks in 16 waves 19 us a
// step on an H100: 70 against 51 us.) A key orders as argmax_take does: larger
// value first, ties to the lower index (torch.argmax's first maximum), NaN never
// picked, -0 equal to +0; so the pick is the same token, in any block order.
#pragma once
#include "common.cuh"
#include "types.h"

// The 64-bit key of logit v at index i: v's bits made to order as unsigned numbers
// (negatives flipped whole, positives' sign bit set) above ~i, so the larger key is
// the larger value and, among equal values, the lower index. 0, below every key of a
// number, is "none yet"; a NaN gets it, so it is never picked over a number.
__device__ __forceinline__ unsigned long long token_key(float v, int i) {
    if (v != v) return 0ull;
    unsigned int u = __float_as_uint(v + 0.0f);  // -0 + 0 = +0
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (0xffffffffu - (unsigned int)i);
}

__device__ __forceinline__ int token_of(unsigned long long key) { return (int)(0xffffffffu - (unsigned int)key); }

// After every thread of the block has folded its logits into block_best[0..M) (shared,
// zeroed before): one thread folds them into the rows' global bests, reductions it does
// not wait for. Every thread of the block calls it.
__device__ __forceinline__ void token_pick_fold(const TokenPick& pick, const unsigned long long* block_best, int M) {
    __syncthreads();
    if (threadIdx.x == 0)
        for (int r = 0; r < M; ++r) atomicMax(pick.best + r, block_best[r]);
}

// The bests into tokens once the LM head has ended: lane r takes row r's, appends it at
// *pos + 1 and re-arms best for the next step; then the position moves on. One warp,
// launched as the LM head's dependent (common.cuh): it waits for it, nothing to load first.
__global__ void __launch_bounds__(32) token_pick_kernel(TokenPick pick, int M) {
    grid_dependency_sync();
    const int p = *pick.pos + 1;
    if ((int)threadIdx.x < M) {
        const int r = threadIdx.x, token = token_of(pick.best[r]);
        pick.best[r] = 0ull;
        pick.next_token[r] = token;
        if (pick.sequence && p < pick.maxT) pick.sequence[(size_t)r * pick.maxT + p] = token;
    }
    __syncwarp();
    if (threadIdx.x == 0) *pick.pos = p;
}

int token_pick_forward(const TokenPick& pick, int M, cudaStream_t stream) {
    if (M > 32) { fprintf(stderr, "token_pick: %d rows, over a warp's 32\n", M); return -1; }
    return engine_launch("matmul", "token_pick_kernel", token_pick_kernel, dim3(1), dim3(32), 0, stream, pick, M);
}
