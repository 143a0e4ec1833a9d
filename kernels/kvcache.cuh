// kvcache.cuh: the KV cache and greedy decoding (seed 004's proposal 1).
//
//   kv_cache_write_kernel  copies the k and v of qkv (B, T, 3C) into this layer's
//                          caches (B, NH, maxT, HS) at positions start..start+T-1,
//                          head-major so a decoding query reads each head's keys
//                          contiguously. One thread per (b, t, channel), so
//                          neighbouring threads read and write neighbouring floats;
//                          KVCACHE_BLOCK_SIZE threads a block. The prefill's
//                          writes; a decoding step's qkv matvec (matmul.cuh,
//                          KVWrite) stores its k and v into the cache itself.
//   argmax_kernel          picks each batch row's next token (the first maximum,
//                          as torch.argmax) and appends it to the sequence. One
//                          block per row, ARGMAX_BLOCK_SIZE threads striding over
//                          the V logits in float4s (several loads in flight each:
//                          one load after another kept a step waiting about 6 us
//                          on an H100), then warp shuffles and one pass over the
//                          warps' bests: a row is the only work of the launch, so
//                          its threads are all the parallelism there is (a multiple
//                          of 32, since the reduction uses whole warps).
//   decode_advance_kernel  moves the device-side position on by one: one thread
//                          for one int, so no launch size to tune (no macro).
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

// logits: B rows of V (row stride `stride`); pos: the position of the token just
// fed, so the pick is written to sequence[b * maxT + *pos + 1] and next_token[b].
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) argmax_kernel(int* __restrict__ next_token, int* __restrict__ sequence,
                                                       const int* __restrict__ pos, const float* __restrict__ logits,
                                                       int V, long long stride, int maxT) {
    __shared__ float best_v[32];
    __shared__ int best_i[32];
    grid_dependency_sync();  // a dependent in the decoding step (common.cuh)
    const int b = blockIdx.x;
    const float* row = logits + b * stride;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    // Every comparison breaks ties by the index, so the order a thread visits its logits in
    // does not matter: the scalar ones before the first 16-byte boundary (a row of an odd V
    // starts anywhere) and after the last, and float4s between, four loads in flight a thread.
    auto take = [&](float v, int i) {
        if (v > bv || (v == bv && i < bi)) { bv = v; bi = i; }
    };
    const int head = min(V, (int)((16 - (reinterpret_cast<uintptr_t>(row) & 15)) % 16 / 4));
    const int quads = (V - head) / 4, tail = head + 4 * quads;
    if (threadIdx.x < head) take(row[threadIdx.x], threadIdx.x);
    for (int i = tail + threadIdx.x; i < V; i += BLOCK) take(row[i], i);
    const float4* body = reinterpret_cast<const float4*>(row + head);
#pragma unroll 4
    for (int q = threadIdx.x; q < quads; q += BLOCK) {
        const float4 v = body[q];
        const int i = head + 4 * q;
        take(v.x, i);
        take(v.y, i + 1);
        take(v.z, i + 2);
        take(v.w, i + 3);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) { best_v[warp] = bv; best_i[warp] = bi; }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < BLOCK / 32; ++w)
            if (best_v[w] > bv || (best_v[w] == bv && best_i[w] < bi)) { bv = best_v[w]; bi = best_i[w]; }
        next_token[b] = bi;
        const int p = *pos + 1;
        if (sequence && p < maxT) sequence[(size_t)b * maxT + p] = bi;
    }
}

__global__ void decode_advance_kernel(int* pos) {
    grid_dependency_sync();  // a dependent in the decoding step (common.cuh)
    *pos += 1;
}

// ---- launchers ------------------------------------------------------------
int kv_cache_write_forward(float* kcache, float* vcache, const float* qkv, const int* start, int B, int T, int NH, int HS,
                           int maxT, cudaStream_t stream) {
    constexpr int BLOCK = KVCACHE_BLOCK_SIZE;
    const dim3 grid((unsigned)CEIL_DIV((long long)B * T * NH * HS, (long long)BLOCK));
    return engine_launch("kvcache", "kv_cache_write_kernel", kv_cache_write_kernel<BLOCK>, grid, dim3(BLOCK), 0, stream, kcache,
                         vcache, qkv, start, B, T, NH, HS, maxT);
}

int argmax_forward(int* next_token, int* sequence, const int* pos, const float* logits, int B, int V, long long stride,
                   int maxT, cudaStream_t stream) {
    constexpr int BLOCK = ARGMAX_BLOCK_SIZE;
    return engine_launch("kvcache", "argmax_kernel", argmax_kernel<BLOCK>, dim3(B), dim3(BLOCK), 0, stream, next_token, sequence,
                         pos, logits, V, stride, maxT);
}

int decode_advance(int* pos, cudaStream_t stream) {
    return engine_launch("kvcache", "decode_advance_kernel", decode_advance_kernel, dim3(1), dim3(1), 0, stream, pos);
}
