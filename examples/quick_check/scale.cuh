// scale.cuh: out = 2 * in + 1 in fp32, for any n, staged through shared memory.
//
// scale_kernel: a block moves one tile of QC_BLOCK * QC_ITEMS * QC_VEC floats of `in`
//   into shared memory (each thread QC_ITEMS loads of QC_VEC floats: float4 loads
//   when QC_VEC is 4), then writes 2 * x + 1 of every element of the tile to `out`.
//   A tile that reaches past n is read and written element by element, guarded.
//   The result does not depend on the launch sizes: every configuration's output
//   is checked against the same values.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on the
// include path, through -I$(CONF_DIR)) may set. On purpose, a sweep of this program
// meets every kind of refusal:
//   - QC_ITEMS must be a power of two: a static_assert refuses 3 (skipped at build);
//   - the tile's static shared memory (QC_BLOCK*QC_ITEMS*QC_VEC*4 bytes) is not a
//     static_assert: ptxas refuses a tile over 48 KB ("uses too much shared data"),
//     a resource limit, also skipped;
//   - QC_FAST_TAIL=1 drops the guarded tail: the grid covers n / tile whole tiles
//     only, so the last n % tile elements are never written and the program's
//     early check (an n that is no multiple of any tile) exits 1: verify_failed.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#ifndef QC_BLOCK
#define QC_BLOCK 256         // threads per block
#endif
#ifndef QC_ITEMS
#define QC_ITEMS 2           // loads per thread (a power of two)
#endif
#ifndef QC_VEC
#define QC_VEC 4             // floats per load: 1 or 4 (float4)
#endif
#ifndef QC_FAST_TAIL
#define QC_FAST_TAIL 0       // 0 or 1: 1 skips the partial last tile, which computes wrong results
#endif

#define QC_TILE (QC_BLOCK * QC_ITEMS * QC_VEC)
#define QC_SMEM_BYTES (QC_TILE * 4)

static_assert(QC_BLOCK >= 32 && QC_BLOCK <= 1024 && QC_BLOCK % 32 == 0,
              "QC_BLOCK must be whole warps, 32..1024 threads");
static_assert(QC_ITEMS >= 1 && (QC_ITEMS & (QC_ITEMS - 1)) == 0, "QC_ITEMS must be a power of two");
static_assert(QC_VEC == 1 || QC_VEC == 4, "QC_VEC must be 1 or 4 (floats per load)");
static_assert(QC_FAST_TAIL == 0 || QC_FAST_TAIL == 1, "QC_FAST_TAIL must be 0 or 1");

__global__ void __launch_bounds__(QC_BLOCK) scale_kernel(const float* __restrict__ in, float* __restrict__ out,
                                                         long long n) {
    __shared__ float tile[QC_TILE];
    const long long base = (long long)blockIdx.x * QC_TILE;
    if (base + QC_TILE <= n) {
#pragma unroll
        for (int k = 0; k < QC_ITEMS; ++k) {
            const int e = (k * QC_BLOCK + threadIdx.x) * QC_VEC;
#if QC_VEC == 4
            *reinterpret_cast<float4*>(&tile[e]) = *reinterpret_cast<const float4*>(&in[base + e]);
#else
            tile[e] = in[base + e];
#endif
        }
    } else {
        for (int e = threadIdx.x; e < QC_TILE; e += QC_BLOCK)
            if (base + e < n) tile[e] = in[base + e];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < QC_TILE; e += QC_BLOCK)
        if (base + e < n) out[base + e] = 2.0f * tile[e] + 1.0f;
}

// Blocks of one launch over n elements: every tile, or (QC_FAST_TAIL) whole tiles only.
inline unsigned scale_blocks(long long n) {
    return (unsigned)(QC_FAST_TAIL ? n / QC_TILE : CEIL_DIV(n, QC_TILE));
}

// One launch over n elements; true when it failed (the cudaCheck convention).
inline bool scale(const float* dIn, float* dOut, long long n) {
    unsigned blocks = scale_blocks(n);
    if (blocks > 0) scale_kernel<<<blocks, QC_BLOCK>>>(dIn, dOut, n);
    return cudaCheck(cudaGetLastError());
}
