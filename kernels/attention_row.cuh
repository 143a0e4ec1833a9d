// attention_row.cuh: one decoding query row's attention against one head's KV
// cache, computed by one block. A device helper with no launch sizes of its own
// (like rownorm.cuh), so the kernels that call it run it at theirs:
//   - attention_decode_kernel (attention_decode.cuh, version 1): a block per (head, row);
//   - the decoding qkv matvec (matvec.cuh): the block that finishes a head's q, k
//     and v columns runs that head's attention in its tail, so a short context's
//     decoding step launches no attention kernel (its ~7 us a layer on an H100
//     were mostly a launch and a chain of dependent loads on 36 blocks).
//
// out[d] = sum_t softmax_t(q . K[t] / sqrt(HS)) V[t][d] over keys t < n.
// Warp w takes keys w, w + NW, ...; its lanes split the head's dimensions (lane
// holds d = lane + 32 j), so a key is one coalesced row read. A warp loads the
// k AND v rows of KEYS keys before it sums any score (one round trip to memory
// per KEYS * NW keys, not three), keeps an online softmax (running max, sum and
// output), and the block combines its warps in shared memory at the end.
#pragma once
#include "common.cuh"

// Head sizes it takes: at most 32 * ATTENTION_ROW_DIMS (a lane holds that many dimensions
// of q, of the output and of each key in flight); the launchers check.
constexpr int ATTENTION_ROW_DIMS = 4;
__host__ __device__ constexpr bool attention_row_supports(int HS) { return HS >= 1 && HS <= 32 * ATTENTION_ROW_DIMS; }
// Shared memory the helper needs, in floats, for a block of `block` threads.
__host__ __device__ constexpr int attention_row_smem_floats(int block, int HS) { return (block / 32) * (HS + 2); }

// DJ dimensions a lane (HS <= 32 DJ), KEYS = 16 / DJ keys a warp in flight: the same
// 32 registers of k and v rows at every head size.
template <int BLOCK, int DJ>
__device__ void attention_row_dims(float* __restrict__ out, const float* q, const float* K, const float* V, int n, int HS,
                                   float* smem) {
    static_assert(BLOCK % 32 == 0, "attention_row reduces over whole warps");
    constexpr int NW = BLOCK / 32, KEYS = 16 / DJ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float scale = 1.0f / sqrtf((float)HS);
    float qd[DJ], acc[DJ];
#pragma unroll
    for (int j = 0; j < DJ; ++j) {
        const int d = lane + 32 * j;
        qd[j] = d < HS ? __ldcg(q + d) * scale : 0.0f;
        acc[j] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;  // this warp's running max and sum of exp(score - m)
    for (int t0 = warp; t0 < n; t0 += NW * KEYS) {
        float kv[KEYS][DJ], vv[KEYS][DJ];
#pragma unroll
        for (int i = 0; i < KEYS; ++i) {
            const int t = t0 + i * NW;
#pragma unroll
            for (int j = 0; j < DJ; ++j) {
                const int d = lane + 32 * j;
                const bool ok = t < n && d < HS;
                kv[i][j] = ok ? __ldcg(K + (size_t)t * HS + d) : 0.0f;
                vv[i][j] = ok ? __ldcg(V + (size_t)t * HS + d) : 0.0f;
            }
        }
        float s[KEYS], mx = m;
#pragma unroll
        for (int i = 0; i < KEYS; ++i) {
            float p = 0.0f;
#pragma unroll
            for (int j = 0; j < DJ; ++j) p += qd[j] * kv[i][j];
            s[i] = warp_sum<32>(p);
            if (t0 + i * NW < n) mx = fmaxf(mx, s[i]);
        }
        const float rescale = expf(m - mx);  // m = -inf the first time: 0 (key t0 < n makes mx finite)
        l *= rescale;
#pragma unroll
        for (int j = 0; j < DJ; ++j) acc[j] *= rescale;
#pragma unroll
        for (int i = 0; i < KEYS; ++i) {
            const float p = t0 + i * NW < n ? expf(s[i] - mx) : 0.0f;
            l += p;
#pragma unroll
            for (int j = 0; j < DJ; ++j) acc[j] += p * vv[i][j];
        }
        m = mx;
    }
    float* wo = smem;            // [NW][HS] each warp's output, scaled to its own max
    float* wm = smem + NW * HS;  // [NW] each warp's max (-inf: a warp without keys)
    float* wl = wm + NW;         // [NW] and sum
#pragma unroll
    for (int j = 0; j < DJ; ++j)
        if (lane + 32 * j < HS) wo[warp * HS + lane + 32 * j] = acc[j];
    if (lane == 0) { wm[warp] = m; wl[warp] = l; }
    __syncthreads();
    float bm = -INFINITY;
    for (int w = 0; w < NW; ++w) bm = fmaxf(bm, wm[w]);  // finite: warp 0 holds key 0
    for (int d = threadIdx.x; d < HS; d += BLOCK) {
        float o = 0.0f, sum = 0.0f;
        for (int w = 0; w < NW; ++w) {
            const float c = expf(wm[w] - bm);
            o += wo[w * HS + d] * c;
            sum += wl[w] * c;
        }
        out[d] = o / sum;
    }
    __syncthreads();  // smem free for the caller's next use
}

// q, K and V may have been written by other blocks of the running kernel (the
// qkv matvec's tail): they are read through L2 (__ldcg), never a stale L1 line.
// `smem`: attention_row_smem_floats(BLOCK, HS) floats. Every thread of the block
// calls it (it has barriers); n >= 1 keys; attention_row_supports(HS).
template <int BLOCK>
__device__ __forceinline__ void attention_row(float* out, const float* q, const float* K, const float* V, int n, int HS,
                                              float* smem) {
    if (HS <= 32) attention_row_dims<BLOCK, 1>(out, q, K, V, n, HS, smem);
    else if (HS <= 64) attention_row_dims<BLOCK, 2>(out, q, K, V, n, HS, smem);
    else attention_row_dims<BLOCK, ATTENTION_ROW_DIMS>(out, q, K, V, n, HS, smem);
}
