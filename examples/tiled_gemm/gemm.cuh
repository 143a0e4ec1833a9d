// gemm.cuh: C = A x B in fp32, row-major, for any M, N, K.
//
// Versions:
//   1. gemm_reference_kernel: one thread per element of C, a plain K loop. The
//      correctness reference; GEMM_REF_BLOCK_X x GEMM_REF_BLOCK_Y threads.
//   2. gemm_tiled_kernel<BM, BN, BK, TM, TN>: a block computes a BM x BN tile of
//      C, stepping through K in BK-wide slices staged in shared memory; each of
//      its (BM/TM)*(BN/TN) threads accumulates a TM x TN patch in registers, so
//      one shared-memory read feeds TM (or TN) multiply-adds. Edges are zero-
//      padded, so no size has to be a multiple of a tile.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path, through -I$(CONF_DIR)) may set; the static_asserts say
// what is legal, so an illegal combination fails to compile with a message that
// names the rule, and a sweep records it as skipped.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#ifndef GEMM_BM
#define GEMM_BM 64      // rows of C per block
#endif
#ifndef GEMM_BN
#define GEMM_BN 64      // columns of C per block
#endif
#ifndef GEMM_BK
#define GEMM_BK 16      // depth of one shared-memory slice
#endif
#ifndef GEMM_TM
#define GEMM_TM 4       // rows of C per thread
#endif
#ifndef GEMM_TN
#define GEMM_TN 4       // columns of C per thread
#endif
#ifndef GEMM_REF_BLOCK_X
#define GEMM_REF_BLOCK_X 16
#endif
#ifndef GEMM_REF_BLOCK_Y
#define GEMM_REF_BLOCK_Y 16
#endif

// Threads per block of the tiled kernel: one per TM x TN patch of the tile.
#define GEMM_THREADS ((GEMM_BM / GEMM_TM) * (GEMM_BN / GEMM_TN))
// Static shared memory of the tiled kernel: one BK-deep slice of A and of B.
#define GEMM_SMEM_BYTES ((GEMM_BM + GEMM_BN) * GEMM_BK * 4)

static_assert(GEMM_BM >= 1 && GEMM_BN >= 1 && GEMM_BK >= 1 && GEMM_TM >= 1 && GEMM_TN >= 1,
              "GEMM_BM, GEMM_BN, GEMM_BK, GEMM_TM and GEMM_TN must be positive");
static_assert(GEMM_BM % GEMM_TM == 0,
              "GEMM_BM must be a multiple of GEMM_TM (a thread owns TM whole rows of the tile)");
static_assert(GEMM_BN % GEMM_TN == 0,
              "GEMM_BN must be a multiple of GEMM_TN (a thread owns TN whole columns of the tile)");
static_assert(GEMM_THREADS % 32 == 0,
              "(GEMM_BM/GEMM_TM)*(GEMM_BN/GEMM_TN) threads must be a multiple of 32 (whole warps)");
static_assert(GEMM_THREADS <= 1024,
              "(GEMM_BM/GEMM_TM)*(GEMM_BN/GEMM_TN) threads must be <= 1024 (a block's limit)");
static_assert((GEMM_BM * GEMM_BK) % GEMM_THREADS == 0 && (GEMM_BK * GEMM_BN) % GEMM_THREADS == 0,
              "GEMM_BM*GEMM_BK and GEMM_BK*GEMM_BN must be multiples of the thread count "
              "(every thread stages as many elements)");
static_assert(GEMM_SMEM_BYTES <= 48 * 1024,
              "(GEMM_BM+GEMM_BN)*GEMM_BK*4 bytes of shared memory must be <= 48 KB (the static limit)");
static_assert(GEMM_TM * GEMM_TN <= 128, "GEMM_TM*GEMM_TN accumulators per thread must be <= 128 (registers)");
static_assert(GEMM_REF_BLOCK_X >= 1 && GEMM_REF_BLOCK_Y >= 1 && GEMM_REF_BLOCK_X * GEMM_REF_BLOCK_Y <= 1024,
              "GEMM_REF_BLOCK_X*GEMM_REF_BLOCK_Y threads must be 1..1024");

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

__global__ void gemm_reference_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_tiled_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
    constexpr int THREADS = (BM / TM) * (BN / TN);
    // A's slice is stored transposed (k-major), so a thread reads its TM rows
    // of one k as consecutive floats, like its TN columns of B.
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);
    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int s = 0; s < BM * BK / THREADS; ++s) {
            int i = tid + s * THREADS, m = i / BK, k = i % BK;   // consecutive threads read along a row of A
            int gm = row0 + m, gk = k0 + k;
            As[k][m] = gm < M && gk < K ? A[(size_t)gm * K + gk] : 0.0f;
        }
#pragma unroll
        for (int s = 0; s < BK * BN / THREADS; ++s) {
            int i = tid + s * THREADS, k = i / BN, n = i % BN;
            int gk = k0 + k, gn = col0 + n;
            Bs[k][n] = gk < K && gn < N ? B[(size_t)gk * N + gn] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][tr * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // the slice is overwritten next
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        int gm = row0 + tr * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int gn = col0 + tc * TN + j;
            if (gm < M && gn < N) C[(size_t)gm * N + gn] = acc[i][j];
        }
    }
}

// ---------------------------------------------------------------------------
// Launchers: they own the grid arithmetic and check the launch at once.
// ---------------------------------------------------------------------------

inline bool gemm_reference(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t stream = 0) {
    dim3 block(GEMM_REF_BLOCK_X, GEMM_REF_BLOCK_Y);
    dim3 grid(CEIL_DIV(N, GEMM_REF_BLOCK_X), CEIL_DIV(M, GEMM_REF_BLOCK_Y));
    gemm_reference_kernel<<<grid, block, 0, stream>>>(M, N, K, A, B, C);
    return cudaCheck(cudaGetLastError());
}

inline bool gemm_tiled(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t stream = 0) {
    dim3 grid(CEIL_DIV(N, GEMM_BN), CEIL_DIV(M, GEMM_BM));
    gemm_tiled_kernel<GEMM_BM, GEMM_BN, GEMM_BK, GEMM_TM, GEMM_TN><<<grid, GEMM_THREADS, 0, stream>>>(M, N, K, A, B, C);
    return cudaCheck(cudaGetLastError());
}
