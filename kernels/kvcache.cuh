// kvcache.cuh: the KV cache and greedy decoding (seed 004's proposal 1).
//
//   kv_cache_write_kernel  copies the k and v of qkv (B, T, 3C) into this layer's
//                          caches (B, NH, maxT, HS) at positions start..start+T-1,
//                          head-major so a decoding query reads each head's keys
//                          contiguously. One thread per (b, t, channel), so
//                          neighbouring threads read and write neighbouring floats;
//                          KVCACHE_BLOCK_SIZE threads a block. The prefill's
//                          writes; a decoding step's qkv matvec (matvec.cuh,
//                          KVWrite) stores its k and v into the cache itself.
//   argmax_kernel          picks each batch row's next token (the first maximum,
//                          as torch.argmax), appends it to the sequence and, with
//                          `advance`, moves the device-side position on: the
//                          prefill's pick (a decoding step picks in its LM head's
//                          matvec instead, token_pick.cuh).
//                          A row's V logits are cut into parts, a block of
//                          ARGMAX_BLOCK_SIZE threads each reading its part in
//                          float4s (about 16 logits a thread, loads in flight),
//                          warp shuffles and one warp over the warps' bests; the
//                          last block of a row to finish (an atomic count) picks
//                          among the parts' bests. One block a row read 50257
//                          logits in about 6 us on an H100, most of a step's tail.
//                          A multiple of 32 threads: the reductions use whole warps.
//
// Positions live in device memory so one decoding step, captured once as a CUDA
// graph, replays for every new token with no host work between steps.
#pragma once
#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef KVCACHE_BLOCK_SIZE
#define KVCACHE_BLOCK_SIZE 256
#endif
static_assert(KVCACHE_BLOCK_SIZE >= 1 && KVCACHE_BLOCK_SIZE <= 1024,
              "KVCACHE_BLOCK_SIZE must be between 1 and 1024 threads per block");
#ifndef ARGMAX_BLOCK_SIZE
#define ARGMAX_BLOCK_SIZE 1024
#endif
static_assert(ARGMAX_BLOCK_SIZE % 32 == 0 && ARGMAX_BLOCK_SIZE >= 32 && ARGMAX_BLOCK_SIZE <= 1024,
              "ARGMAX_BLOCK_SIZE must be a multiple of 32 from 32 to 1024 (whole warps reduce)");

// ---- kernels --------------------------------------------------------------
// start: device pointer to the first position (nullptr means 0).
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) kv_cache_write_kernel(float* __restrict__ kcache, float* __restrict__ vcache,
                                                               const float* __restrict__ qkv, const int* __restrict__ start,
                                                               int B, int T, int NH, int HS, int maxT) {
    const long long idx = (long long)blockIdx.x * BLOCK + threadIdx.x;
    const int C = NH * HS;
    if (idx >= (long long)B * T * C) return;
    const int c = (int)(idx % C), t = (int)((idx / C) % T), b = (int)(idx / C / T);
    const int h = c / HS, d = c % HS;
    const int p = (start ? *start : 0) + t;
    const size_t dst = (((size_t)b * NH + h) * maxT + p) * HS + d;
    const float* src = qkv + ((size_t)b * T + t) * 3 * C;
    kcache[dst] = src[C + c];
    vcache[dst] = src[2 * C + c];
}

// The larger of two (value, index) candidates, ties to the lower index (torch.argmax's first maximum).
__device__ __forceinline__ void argmax_take(float& bv, int& bi, float v, int i) {
    if (v > bv || (v == bv && i < bi)) { bv = v; bi = i; }
}

// The warp's best (value, index) in every lane.
__device__ __forceinline__ void argmax_warp(float& bv, int& bi) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        argmax_take(bv, bi, __shfl_xor_sync(0xffffffffu, bv, off), __shfl_xor_sync(0xffffffffu, bi, off));
}

// Blocks a row of V logits takes: about 16 logits a thread (four float4 loads in flight),
// at most ARGMAX_MAX_BLOCKS. One block read a row of 50257 alone in about 6 us on an H100.
constexpr int ARGMAX_MAX_BLOCKS = 32;
inline int argmax_blocks(int V, int block) { return std::max(1, std::min(ARGMAX_MAX_BLOCKS, CEIL_DIV(V, 16 * block))); }

// logits: B rows of V (row stride `stride`); pos: the position of the token just fed, so
// the pick is written to sequence[b * maxT + *pos + 1] and next_token[b]. Block (g, b)
// takes part g of row b's float4s (block 0 also the scalars before the row's first 16-byte
// boundary, a row of an odd V starting anywhere, and after its last); with several parts,
// each leaves its best in `scratch` and the block that counts a row's last part picks
// from them. With `advance`, the block finishing the last row moves *pos on by one, after
// every row has read it (the decoding step's end: no launch of its own for it).
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) argmax_kernel(int* __restrict__ next_token, int* __restrict__ sequence,
                                                       int* __restrict__ pos, const float* __restrict__ logits, int V,
                                                       long long stride, int maxT, ArgmaxScratch scratch, bool advance) {
    __shared__ float best_v[32];
    __shared__ int best_i[32];
    __shared__ bool row_done;
    grid_dependency_sync();  // a dependent in the decoding step (common.cuh)
    const int g = blockIdx.x, G = gridDim.x, b = blockIdx.y;
    const float* row = logits + b * stride;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    const int head = min(V, (int)((16 - (reinterpret_cast<uintptr_t>(row) & 15)) % 16 / 4));
    const int quads = (V - head) / 4, tail = head + 4 * quads;
    if (g == 0) {
        if (threadIdx.x < head) argmax_take(bv, bi, row[threadIdx.x], threadIdx.x);
        for (int i = tail + threadIdx.x; i < V; i += BLOCK) argmax_take(bv, bi, row[i], i);
    }
    const float4* body = reinterpret_cast<const float4*>(row + head);
    const int q_end = (int)((long long)quads * (g + 1) / G);
#pragma unroll 4
    for (int q = (int)((long long)quads * g / G) + threadIdx.x; q < q_end; q += BLOCK) {
        const float4 v = body[q];
        const int i = head + 4 * q;
        argmax_take(bv, bi, v.x, i);
        argmax_take(bv, bi, v.y, i + 1);
        argmax_take(bv, bi, v.z, i + 2);
        argmax_take(bv, bi, v.w, i + 3);
    }
    argmax_warp(bv, bi);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) { best_v[warp] = bv; best_i[warp] = bi; }
    __syncthreads();
    if (warp != 0) return;
    bv = lane < BLOCK / 32 ? best_v[lane] : -INFINITY;
    bi = lane < BLOCK / 32 ? best_i[lane] : 0x7fffffff;
    if (G > 1) {  // this part's best out, then the row's last part to be counted picks among them
        argmax_warp(bv, bi);
        if (lane == 0) {
            scratch.value[b * ARGMAX_MAX_BLOCKS + g] = bv;
            scratch.index[b * ARGMAX_MAX_BLOCKS + g] = bi;
            __threadfence();
            row_done = atomicAdd(&scratch.counters[b], 1u) == (unsigned int)G - 1;
        }
        __syncwarp();
        if (!row_done) return;
        __threadfence();
        bv = lane < G ? __ldcg(scratch.value + b * ARGMAX_MAX_BLOCKS + lane) : -INFINITY;
        bi = lane < G ? __ldcg(scratch.index + b * ARGMAX_MAX_BLOCKS + lane) : 0x7fffffff;
    }
    argmax_warp(bv, bi);
    if (lane != 0) return;
    if (G > 1) scratch.counters[b] = 0;  // ready for the next launch
    next_token[b] = bi;
    const int p = *pos + 1;
    if (sequence && p < maxT) sequence[(size_t)b * maxT + p] = bi;
    if (advance) {
        __threadfence();
        if (atomicAdd(&scratch.counters[gridDim.y], 1u) == gridDim.y - 1) {  // every row has read *pos
            *pos = p;
            scratch.counters[gridDim.y] = 0;
        }
    }
}

// ---- launchers ------------------------------------------------------------
int kv_cache_write_forward(float* kcache, float* vcache, const float* qkv, const int* start, int B, int T, int NH, int HS,
                           int maxT, cudaStream_t stream) {
    constexpr int BLOCK = KVCACHE_BLOCK_SIZE;
    const dim3 grid((unsigned)CEIL_DIV((long long)B * T * NH * HS, (long long)BLOCK));
    return engine_launch("kvcache", "kv_cache_write_kernel", kv_cache_write_kernel<BLOCK>, grid, dim3(BLOCK), 0, stream, kcache,
                         vcache, qkv, start, B, T, NH, HS, maxT);
}

template <int BLOCK>
int argmax_sized(int* next_token, int* sequence, int* pos, const float* logits, int B, int V, long long stride, int maxT,
                 ArgmaxScratch scratch, bool advance, cudaStream_t stream) {
    if (!scratch.value || !scratch.index || !scratch.counters) {
        fprintf(stderr, "argmax: needs its scratch (B x %d bests, B + 1 counters at zero)\n", ARGMAX_MAX_BLOCKS);
        return -1;
    }
    const dim3 grid(argmax_blocks(V, BLOCK), B);
    return engine_launch("kvcache", "argmax_kernel", argmax_kernel<BLOCK>, grid, dim3(BLOCK), 0, stream, next_token, sequence,
                         pos, logits, V, stride, maxT, scratch, advance);
}

int argmax_forward(int* next_token, int* sequence, int* pos, const float* logits, int B, int V, long long stride, int maxT,
                   ArgmaxScratch scratch, bool advance, cudaStream_t stream) {
    return argmax_sized<ARGMAX_BLOCK_SIZE>(next_token, sequence, pos, logits, B, V, stride, maxT, scratch, advance, stream);
}

size_t argmax_scratch_slots(int B) { return (size_t)B * ARGMAX_MAX_BLOCKS; }

