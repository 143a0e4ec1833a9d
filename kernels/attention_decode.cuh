// attention_decode.cuh: a decoding step's attention, one query row per (b, h)
// against the KV cache (kvcache.cuh), qkv (B, 1, 3C) in, (B, C) out; apart
// from attention.cuh's prefill kernels so a sweep of its launch sizes
// (spaces/decode.yaml) recompiles this unit alone.
//
// Versions:
//   1. attention_decode_kernel: one query row per (b, h) against the KV cache
//      (kvcache.cuh), reading the position from device memory so a captured
//      CUDA graph can replay every decoding step. A block per (h, b), the grid
//      NH x B, walks every key with attention_row (attention_row.cuh: each warp
//      loads the k and v rows of several keys before it sums a score, keeps an
//      online softmax, and the warps are combined in shared memory). The same
//      helper runs in the decoding qkv matvec's tail (matvec.cuh), which is how
//      a decoding step with a short context attends; kernel_check checks it here.
//   2. attention_decode_split_kernel (flash-decoding; what gpt2_decode_step
//      launches for a long context): version 1 has NH x B blocks for a whole
//      GPU, each walking every key in turn. Here positions 0..pos are cut into chunks of
//      ATTENTION_DECODE_CHUNK keys, a block per (h, b, chunk); the grid is sized
//      for maxT and blocks past pos leave at once (pos lives on the device, so a
//      replayed CUDA graph sees each step's). In a block each warp takes keys
//      w, w + NW, ... of the chunk: the lanes split the head's dimensions, so a
//      warp issues all its keys' loads before one warp sum per key, then the
//      weighted values the same way; a warp's max, sum and partial output are
//      combined over the block in shared memory (online-softmax rescaling), and
//      written, unnormalized, with the block's max and sum, to a scratch slot of
//      the chunk. The last block of a head to finish (an atomic count, reset by
//      that block for the next step) rescales and adds the chunks' outputs in
//      chunk order. A context of one chunk writes its output directly.
#pragma once
#include "attention_row.cuh"
#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef ATTENTION_DECODE_BLOCK_SIZE
#define ATTENTION_DECODE_BLOCK_SIZE 256
#endif
static_assert(ATTENTION_DECODE_BLOCK_SIZE % 32 == 0 && ATTENTION_DECODE_BLOCK_SIZE >= 32 && ATTENTION_DECODE_BLOCK_SIZE <= 1024,
              "ATTENTION_DECODE_BLOCK_SIZE must be a multiple of 32 (a warp per key) from 32 to 1024");

// Keys per block of the split decoding kernel; each warp keeps CHUNK / (BLOCK/32)
// scores in registers, so a block of few warps takes short chunks.
#ifndef ATTENTION_DECODE_CHUNK
#define ATTENTION_DECODE_CHUNK 32
#endif
static_assert(ATTENTION_DECODE_CHUNK >= 1 && ATTENTION_DECODE_CHUNK <= 1024,
              "ATTENTION_DECODE_CHUNK (keys a decoding block takes) must be 1..1024");
static_assert(ATTENTION_DECODE_BLOCK_SIZE < 32 ||
                  (ATTENTION_DECODE_CHUNK + ATTENTION_DECODE_BLOCK_SIZE / 32 - 1) / (ATTENTION_DECODE_BLOCK_SIZE / 32) <= 32,
              "ATTENTION_DECODE_CHUNK / (ATTENTION_DECODE_BLOCK_SIZE/32), the keys each warp scores in registers, must be at most 32");

// ---- version 1: decode ----------------------------------------------------
// kcache/vcache: this layer's (B, NH, maxT, HS) caches; keys 0..*pos are valid.
// The block's work is attention_row's (attention_row.cuh), which the decoding qkv
// matvec also runs in its tail.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) attention_decode_kernel(float* __restrict__ out, const float* __restrict__ qkv,
                                                                 const float* __restrict__ kcache, const float* __restrict__ vcache,
                                                                 const int* __restrict__ pos, int NH, int HS, int maxT) {
    extern __shared__ float sm[];  // attention_row_smem_floats(BLOCK, HS)
    grid_dependency_sync();
    const int h = blockIdx.x, b = blockIdx.y, C = NH * HS;
    const size_t head = ((size_t)b * NH + h) * maxT * HS;
    attention_row<BLOCK>(out + (size_t)b * C + h * HS, qkv + (size_t)b * 3 * C + h * HS, kcache + head, vcache + head, *pos + 1,
                         HS, sm);
}

// ---- version 2: split decode (flash-decoding) ------------------------------
// Scratch for a (b, h) pair's chunks: HS floats of output per chunk, then a max
// and a sum per chunk; `splits_max` = ceil(maxT / CHUNK) slots each.
struct AttentionDecodeScratch {
    float* o;  // [B*NH][splits_max][HS]
    float* ml; // [B*NH][splits_max][2]
    int splits_max;
    __host__ __device__ static AttentionDecodeScratch at(float* base, int B, int NH, int HS, int splits_max) {
        return {base, base + (size_t)B * NH * splits_max * HS, splits_max};
    }
};

template <int BLOCK, int CHUNK>
__global__ void __launch_bounds__(BLOCK) attention_decode_split_kernel(float* __restrict__ out, const float* __restrict__ qkv,
                                                                       const float* __restrict__ kcache,
                                                                       const float* __restrict__ vcache,
                                                                       const int* __restrict__ pos, AttentionDecodeScratch scratch,
                                                                       unsigned int* __restrict__ counters, int NH, int HS,
                                                                       int maxT) {
    constexpr int NW = BLOCK / 32, KPW = (CHUNK + NW - 1) / NW;
    extern __shared__ float sm[];
    float* wo = sm;                        // [NW][HS] each warp's unnormalized output
    float* wm = wo + NW * HS;              // [NW] each warp's max
    float* wl = wm + NW;                   // [NW] each warp's sum
    float* zm = wl + NW;                   // [splits_max] the last block: every chunk's max,
    float* zl = zm + scratch.splits_max;   //   sum
    float* zw = zl + scratch.splits_max;   //   and weight
    __shared__ bool is_last;
    grid_dependency_sync();  // launched as a dependent in the decoding step (common.cuh): pos, q, the cache after this
    const int h = blockIdx.x, b = blockIdx.y, z = blockIdx.z;
    const int last = *pos, splits = last / CHUNK + 1;
    if (z >= splits) return;  // past the position: the whole block leaves
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int C = NH * HS, bh = b * NH + h;
    const int t0 = z * CHUNK, t_end = min(t0 + CHUNK, last + 1);
    const float* q = qkv + (size_t)b * 3 * C + h * HS;
    const float* K = kcache + (size_t)bh * maxT * HS;
    const float* V = vcache + (size_t)bh * maxT * HS;
    const float scale = 1.0f / sqrtf((float)HS);

    // Scores of this warp's keys t0 + warp + i*NW: every key's loads before any sum.
    float s[KPW];
#pragma unroll
    for (int i = 0; i < KPW; ++i) s[i] = 0.0f;
    for (int d = lane; d < HS; d += 32) {
        const float qd = q[d];
#pragma unroll
        for (int i = 0; i < KPW; ++i) {
            const int t = t0 + warp + i * NW;
            if (t < t_end) s[i] += qd * K[(size_t)t * HS + d];
        }
    }
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < KPW; ++i) {
        s[i] = warp_sum<32>(s[i]) * scale;  // every lane holds the sum
        if (t0 + warp + i * NW < t_end) m = fmaxf(m, s[i]);
    }
    float l = 0.0f;
#pragma unroll
    for (int i = 0; i < KPW; ++i) {
        s[i] = t0 + warp + i * NW < t_end ? expf(s[i] - m) : 0.0f;  // a warp without keys: all 0, m = -inf
        l += s[i];
    }
    for (int d = lane; d < HS; d += 32) {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < KPW; ++i) {
            const int t = t0 + warp + i * NW;
            if (t < t_end) acc += s[i] * V[(size_t)t * HS + d];
        }
        wo[warp * HS + d] = acc;
    }
    if (lane == 0) { wm[warp] = m; wl[warp] = l; }
    __syncthreads();

    // The block's chunk: warps rescaled to the block's max (finite: warp 0 holds key t0).
    float bm = -INFINITY;
    for (int w = 0; w < NW; ++w) bm = fmaxf(bm, wm[w]);
    float bl = 0.0f;
    for (int w = 0; w < NW; ++w) bl += wl[w] * expf(wm[w] - bm);
    float* o_z = scratch.o + ((size_t)bh * scratch.splits_max + z) * HS;
    for (int d = threadIdx.x; d < HS; d += BLOCK) {
        float o = 0.0f;
        for (int w = 0; w < NW; ++w) o += wo[w * HS + d] * expf(wm[w] - bm);
        if (splits == 1) out[(size_t)b * C + h * HS + d] = o / bl;
        else o_z[d] = o;
    }
    if (splits == 1) return;
    if (threadIdx.x == 0) {
        scratch.ml[((size_t)bh * scratch.splits_max + z) * 2] = bm;
        scratch.ml[((size_t)bh * scratch.splits_max + z) * 2 + 1] = bl;
    }
    // Publish this chunk, then count it; the block that counts the last chunk combines.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[bh], 1u) == (unsigned int)splits - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const float* ml = scratch.ml + (size_t)bh * scratch.splits_max * 2;
    for (int j = threadIdx.x; j < splits; j += BLOCK) {
        zm[j] = __ldcg(ml + 2 * j);
        zl[j] = __ldcg(ml + 2 * j + 1);
    }
    __syncthreads();
    float gm = -INFINITY;
    for (int j = 0; j < splits; ++j) gm = fmaxf(gm, zm[j]);
    for (int j = threadIdx.x; j < splits; j += BLOCK) zw[j] = expf(zm[j] - gm);
    __syncthreads();
    float gl = 0.0f;
    for (int j = 0; j < splits; ++j) gl += zl[j] * zw[j];
    const float* o_all = scratch.o + (size_t)bh * scratch.splits_max * HS;
    for (int d = threadIdx.x; d < HS; d += BLOCK) {
        float o = 0.0f;
        for (int j = 0; j < splits; ++j) o += __ldcg(o_all + (size_t)j * HS + d) * zw[j];
        out[(size_t)b * C + h * HS + d] = o / gl;
    }
    if (threadIdx.x == 0) counters[bh] = 0;  // ready for the next step (a graph replay)
}
// ---- launchers ------------------------------------------------------------
int attention_decode_forward(float* out, const float* qkv, const float* kcache, const float* vcache, const int* pos, int B,
                             int NH, int HS, int maxT, cudaStream_t stream) {
    constexpr int BLOCK = ATTENTION_DECODE_BLOCK_SIZE;
    if (!attention_row_supports(HS)) {
        fprintf(stderr, "attention_decode: head size %d, over the %d a block's lanes hold\n", HS, 32 * ATTENTION_ROW_DIMS);
        return -1;
    }
    const size_t smem = sizeof(float) * attention_row_smem_floats(BLOCK, HS);
    return engine_launch("attention", "attention_decode_kernel", attention_decode_kernel<BLOCK>, dim3(NH, B), dim3(BLOCK), smem,
                         stream, out, qkv, kcache, vcache, pos, NH, HS, maxT);
}

// Scratch the split decoding kernel needs for a B x NH cache of maxT positions:
// floats (the chunks' outputs, maxes and sums) and counters (one per head and
// sequence, zeroed once: the kernel leaves them zero).
size_t attention_decode_scratch_floats(int B, int NH, int HS, int maxT) {
    return (size_t)B * NH * CEIL_DIV(maxT, ATTENTION_DECODE_CHUNK) * (HS + 2);
}
size_t attention_decode_counters(int B, int NH) { return (size_t)B * NH; }

template <int BLOCK, int CHUNK>
int attention_decode_split_sized(float* out, const float* qkv, const float* kcache, const float* vcache, const int* pos,
                                 float* scratch, unsigned int* counters, int B, int NH, int HS, int maxT, cudaStream_t stream) {
    const int splits_max = CEIL_DIV(maxT, CHUNK);
    const size_t smem = sizeof(float) * ((size_t)(BLOCK / 32) * (HS + 2) + 3 * (size_t)splits_max);
    if (smem > 48 * 1024) {
        fprintf(stderr, "attention_decode_split: maxT=%d, HS=%d need %zu bytes of shared memory, over 48 KB\n", maxT, HS, smem);
        return -1;
    }
    if (!scratch || !counters) { fprintf(stderr, "attention_decode_split: no scratch (allocate the cache with gpt2_alloc_cache)\n"); return -1; }
    const AttentionDecodeScratch sc = AttentionDecodeScratch::at(scratch, B, NH, HS, splits_max);
    return engine_launch("attention", "attention_decode_split_kernel", attention_decode_split_kernel<BLOCK, CHUNK>,
                         dim3(NH, B, splits_max), dim3(BLOCK), smem, stream, out, qkv, kcache, vcache, pos, sc, counters, NH, HS,
                         maxT);
}

int attention_decode_split_forward(float* out, const float* qkv, const float* kcache, const float* vcache, const int* pos,
                                   float* scratch, unsigned int* counters, int B, int NH, int HS, int maxT, cudaStream_t stream) {
    return attention_decode_split_sized<ATTENTION_DECODE_BLOCK_SIZE, ATTENTION_DECODE_CHUNK>(
        out, qkv, kcache, vcache, pos, scratch, counters, B, NH, HS, maxT, stream);
}
