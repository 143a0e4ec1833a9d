// matmul.cuh: the linear layers, out[M, N] = inp[M, K] . weight[N, K]^T
// (weights stored as llm.c does, one output channel per row, so both operands
// run along K). Bias and activation are fused into the stores of the own
// kernel (and of matvec.cuh's); after cuBLAS and the tiled kernel, prepare.cuh applies them.
//
// Versions, chosen at run time by MatmulImpl (programs' --matmul flag):
//   1. matmul_tiled_kernel (--matmul tiled): the textbook shared-memory tiled
//      kernel, one output per thread in a TILE x TILE block (seed 001's first
//      approach; seed 004's FP tile). Padded tiles avoid bank conflicts.
//   2. matmul_kernel (--matmul own, matmul_simt.cuh): warp-tiled SIMT. A block of
//      (BM/WM)*(BN/WN) warps computes a BM x BN tile; each warp a WM x WN tile;
//      each lane TM x TN outputs in registers as 4x4 patches spread across the
//      warp tile, so a quarter warp's float4 reads of shared memory hit eight
//      distinct 16-byte words (no bank conflicts) and every float read feeds 4
//      to 8 FMAs. K is walked in BK-wide slices that cp.async copies into a
//      STAGES-deep ring of shared memory, transposed on the way (4-byte copies),
//      while the FMAs run on older slices. The epilogue (bias, bias+gelu,
//      bias+residual) is applied in the stores, so the forward pass at fusion
//      `full` launches no separate prepare-out kernel. A grid smaller than the
//      GPU splits K across blocks (split-K) and sums the slices in a second
//      kernel, in a fixed order, which then applies the epilogue.
//      On an H100 at the default tiles: 0.83-1.03 of cuBLAS SGEMM on GPT-2's
//      linear layers (bench/engine.py); the version before it (register-staged
//      double buffering, thread tiles on a flat 16x16 grid, split-K only below
//      one block per SM) ran at 0.61-0.83. Measured with matmul_tiles (on an
//      H200, ratios to cuBLAS in the same run): at slices of 8 this kernel ran
//      the LM head at 0.76 (the old one: 0.69 on the H100), slices of 32 added
//      about 8% on the large shapes, and splitting K in two where 192 tiles
//      meet 132 SMs 14% (K 768) to 26% (K 3072).
//   3. cuBLAS SGEMM (--matmul cublas): the reference path (FP32, no TF32).
//   4. matmul_tf32x3_kernel (--matmul tf32x3, matmul_tf32x3.cuh): the tensor
//      cores at FP32 accuracy, each product as three TF32 MMAs; the engine's
//      default since 2026-11-26. On an H100 at its default tiles: 1.02-1.41x
//      cuBLAS SGEMM on GPT-2's linear layers, its error against FP64 a third of
//      cuBLAS's (matmul_tiles).
#pragma once
#include <algorithm>
#include <type_traits>
#include <utility>

#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef MATMUL_TILE
#define MATMUL_TILE 16
#endif
static_assert(MATMUL_TILE >= 1 && MATMUL_TILE * MATMUL_TILE <= 1024,
              "MATMUL_TILE must be 1..32 (a TILE x TILE block is at most 1024 threads)");

#ifndef MATMUL_BM
#define MATMUL_BM 128
#endif
#ifndef MATMUL_BN
#define MATMUL_BN 128
#endif
#ifndef MATMUL_BK
#define MATMUL_BK 32
#endif
#ifndef MATMUL_WM
#define MATMUL_WM 64
#endif
#ifndef MATMUL_WN
#define MATMUL_WN 32
#endif
#ifndef MATMUL_TM
#define MATMUL_TM 8
#endif
#ifndef MATMUL_TN
#define MATMUL_TN 8
#endif
#ifndef MATMUL_STAGES
#define MATMUL_STAGES 2
#endif
static_assert(MATMUL_TM % 4 == 0 && MATMUL_TN % 4 == 0 && MATMUL_TM >= 4 && MATMUL_TN >= 4,
              "MATMUL_TM and MATMUL_TN must be multiples of 4 (a thread's tile is made of 4x4 float4 patches)");
static_assert(MATMUL_WM % MATMUL_TM == 0 && MATMUL_WN % MATMUL_TN == 0 && (MATMUL_WM / MATMUL_TM) * (MATMUL_WN / MATMUL_TN) == 32,
              "MATMUL warp tile: (MATMUL_WM/MATMUL_TM) * (MATMUL_WN/MATMUL_TN) must be 32, one patch per lane");
static_assert(MATMUL_BM % MATMUL_WM == 0 && MATMUL_BN % MATMUL_WN == 0,
              "MATMUL_BM must be a multiple of MATMUL_WM and MATMUL_BN a multiple of MATMUL_WN (warps tile the block)");
static_assert((MATMUL_BM / MATMUL_WM) * (MATMUL_BN / MATMUL_WN) * 32 <= 1024,
              "MATMUL threads per block, (BM/WM)*(BN/WN)*32, must be at most 1024");
static_assert(MATMUL_BK >= 1 && ((MATMUL_BM / MATMUL_WM) * (MATMUL_BN / MATMUL_WN) * 32) % MATMUL_BK == 0,
              "MATMUL_BK must divide the threads per block (each thread stages one column of every slice)");
static_assert(MATMUL_STAGES >= 2 && MATMUL_STAGES <= 8, "MATMUL_STAGES (shared-memory pipeline depth) must be 2..8");
static_assert(MATMUL_STAGES * MATMUL_BK * (MATMUL_BM + MATMUL_BN + 8) * 4 <= 227 * 1024,
              "MATMUL tiles need STAGES*BK*(BM+BN+8)*4 bytes of shared memory, over the 227 KB any GPU allows a block");
static_assert(MATMUL_TM * MATMUL_TN <= 128, "MATMUL_TM * MATMUL_TN accumulators per thread must be <= 128 (registers)");

// The 3xTF32 tensor-core kernel (--matmul tf32x3, matmul_tf32x3.cuh): a block
// tile BM x BN of warp tiles WM x WN (each of 16 x 8 mma tiles), K in BK-wide
// slices through a STAGES-deep ring. The default, 128 x 64 tiles of four 64 x 32
// warps (two blocks a multiprocessor), is what spaces/full.yaml picked on an H100
// (1.09x the 128 x 128 tiles over the forward pass); matmul_tiles then measured
// it at 1.02-1.41x cuBLAS SGEMM on GPT-2's shapes at B*T 4096 (2026-11-26).
#ifndef MATMUL_TF32X3_BM
#define MATMUL_TF32X3_BM 128
#endif
#ifndef MATMUL_TF32X3_BN
#define MATMUL_TF32X3_BN 64
#endif
#ifndef MATMUL_TF32X3_BK
#define MATMUL_TF32X3_BK 32
#endif
#ifndef MATMUL_TF32X3_WM
#define MATMUL_TF32X3_WM 64
#endif
#ifndef MATMUL_TF32X3_WN
#define MATMUL_TF32X3_WN 32
#endif
#ifndef MATMUL_TF32X3_STAGES
#define MATMUL_TF32X3_STAGES 4
#endif
static_assert(MATMUL_TF32X3_WM % 16 == 0 && MATMUL_TF32X3_WN % 8 == 0 && MATMUL_TF32X3_WM >= 16 && MATMUL_TF32X3_WN >= 8,
              "MATMUL_TF32X3_WM must be a multiple of 16 and MATMUL_TF32X3_WN of 8 (a warp tile is whole 16 x 8 mma tiles)");
static_assert((MATMUL_TF32X3_WM / 16) * (MATMUL_TF32X3_WN / 8) <= 32,
              "MATMUL_TF32X3_WM * MATMUL_TF32X3_WN must be at most 4096 (a lane holds 8 accumulators per 16 x 8 tile pair; more spill)");
static_assert(MATMUL_TF32X3_BM % MATMUL_TF32X3_WM == 0 && MATMUL_TF32X3_BN % MATMUL_TF32X3_WN == 0,
              "MATMUL_TF32X3_BM must be a multiple of MATMUL_TF32X3_WM and MATMUL_TF32X3_BN of MATMUL_TF32X3_WN (warps tile the block)");
static_assert((MATMUL_TF32X3_BM / MATMUL_TF32X3_WM) * (MATMUL_TF32X3_BN / MATMUL_TF32X3_WN) * 32 <= 1024,
              "MATMUL_TF32X3 threads per block, (BM/WM)*(BN/WN)*32, must be at most 1024");
static_assert(MATMUL_TF32X3_BK % 16 == 0 && MATMUL_TF32X3_BK >= 16 && MATMUL_TF32X3_BK <= 128,
              "MATMUL_TF32X3_BK must be 16, 32, 48, ... 128 (whole 16-wide k steps)");
static_assert(MATMUL_TF32X3_STAGES >= 2 && MATMUL_TF32X3_STAGES <= 8, "MATMUL_TF32X3_STAGES (pipeline depth) must be 2..8");
static_assert(MATMUL_TF32X3_STAGES * MATMUL_TF32X3_BK * (MATMUL_TF32X3_BM + MATMUL_TF32X3_BN) * 4 <= 227 * 1024,
              "MATMUL_TF32X3 tiles need STAGES*BK*(BM+BN)*4 bytes of shared memory, over the 227 KB any GPU allows a block");

#ifndef MATMUL_SPLITK_BLOCK_SIZE
#define MATMUL_SPLITK_BLOCK_SIZE 256
#endif
static_assert(MATMUL_SPLITK_BLOCK_SIZE >= 1 && MATMUL_SPLITK_BLOCK_SIZE <= 1024,
              "MATMUL_SPLITK_BLOCK_SIZE must be between 1 and 1024 threads per block");

#include "matmul_simt.cuh"
#include "matmul_splitk.cuh"
#include "matmul_tf32x3.cuh"

// ---- version 1: tiled -----------------------------------------------------
template <int TILE>
__global__ void __launch_bounds__(TILE* TILE) matmul_tiled_kernel(float* __restrict__ out, const float* __restrict__ A,
                                                                  const float* __restrict__ W, int M, int N, int K) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Ws[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m = blockIdx.y * TILE + ty, n = blockIdx.x * TILE + tx;
    const int wn = blockIdx.x * TILE + ty;  // the W row this thread stages
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (m < M && k0 + tx < K) ? A[(size_t)m * K + k0 + tx] : 0.0f;
        Ws[ty][tx] = (wn < N && k0 + tx < K) ? W[(size_t)wn * K + k0 + tx] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Ws[tx][kk];
        __syncthreads();
    }
    if (m < M && n < N) out[(size_t)m * N + n] = acc;
}

// ---- version 3: cuBLAS ----------------------------------------------------
#ifdef ENGINE_WITH_CUBLAS
#include <cublas_v2.h>
inline cublasHandle_t engine_cublas_handle() {
    static cublasHandle_t handle = [] {
        cublasHandle_t h = nullptr;
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return (cublasHandle_t) nullptr;
        cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);  // plain FP32: no TF32, like transformers with TF32 off
        return h;
    }();
    return handle;
}

inline int matmul_cublas(float* out, const float* A, const float* W, int M, int N, int K, cudaStream_t stream) {
    cublasHandle_t h = engine_cublas_handle();
    if (!h) { fprintf(stderr, "matmul_cublas: cublasCreate failed\n"); return -1; }
    cublasSetStream(h, stream);
    const float one = 1.0f, zero = 0.0f;
    nvtxRangePushA("matmul");
    LaunchRecorder::get().begin("cublas_sgemm", dim3(0), dim3(0), stream);
    // Column-major view: out^T (N x M) = W (N x K as K x N, transposed) . A^T (K x M)
    const cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, K, A, K, &zero, out, N);
    LaunchRecorder::get().end(stream);
    nvtxRangePop();
    if (st != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasSgemm failed with status %d\n", (int)st); return -1; }
    return 0;
}
#endif

bool matmul_has_cublas() {
#ifdef ENGINE_WITH_CUBLAS
    return true;
#else
    return false;
#endif
}

// ---- launchers ------------------------------------------------------------
template <int TILE>
int matmul_tiled_sized(float* out, const float* A, const float* W, int M, int N, int K, cudaStream_t stream) {
    const dim3 block(TILE, TILE), grid(CEIL_DIV(N, TILE), CEIL_DIV(M, TILE));
    return engine_launch("matmul", "matmul_tiled_kernel", matmul_tiled_kernel<TILE>, grid, block, 0, stream, out, A, W, M, N, K);
}

// out = epilogue(A . W^T + bias) with the engine's own SIMT kernel at the given tiles.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES>
int matmul_own_sized(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual, int M,
                     int N, int K, cudaStream_t stream, int splits = 0) {
    using T = MatmulTiles<BM, BN, BK, WM, WN, TM, TN, STAGES>;
    return matmul_split_k_run<BM, BN, BK>(e, out, bias, residual, M, N, K, stream, splits, [&](auto ep, dim3 grid, float* dst,
                                                                                                 int chunk) {
        constexpr auto kernel = matmul_kernel<BM, BN, BK, WM, WN, TM, TN, STAGES, decltype(ep)::value>;
        if (!matmul_kernel_fits<kernel>(T::SMEM_BYTES, T::THREADS)) return -1;
        return engine_launch("matmul", "matmul_kernel", kernel, grid, dim3(T::THREADS), T::SMEM_BYTES, stream, dst, A, W,
                             bias, residual, M, N, K, chunk);
    });
}

// The tf32x3 kernel runs where its 16-byte copies can: K a multiple of 4, both operands 16-byte aligned.
inline bool matmul_tf32x3_fits(const float* A, const float* W, int K) { return K % 4 == 0 && aligned16(A, W); }

// out = epilogue(A . W^T + bias) with the 3xTF32 tensor-core kernel (matmul_tf32x3.cuh) at the given tiles.
template <int BM, int BN, int BK, int WM, int WN, int STAGES>
int matmul_tf32x3_sized(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual, int M,
                    int N, int K, cudaStream_t stream, int splits = 0) {
    using T = MatmulTf32x3Tiles<BM, BN, BK, WM, WN, STAGES>;
    if (!matmul_tf32x3_fits(A, W, K)) {
        fprintf(stderr, "matmul tf32x3: K=%d is not a multiple of 4 or an operand is not 16-byte aligned\n", K);
        return -1;
    }
    return matmul_split_k_run<BM, BN, BK>(e, out, bias, residual, M, N, K, stream, splits, [&](auto ep, dim3 grid, float* dst,
                                                                                                 int chunk) {
        constexpr auto kernel = matmul_tf32x3_kernel<BM, BN, BK, WM, WN, STAGES, decltype(ep)::value>;
        if (!matmul_kernel_fits<kernel>(T::SMEM_BYTES, T::THREADS)) return -1;
        return engine_launch("matmul", "matmul_tf32x3_kernel", kernel, grid, dim3(T::THREADS), T::SMEM_BYTES, stream, dst, A, W,
                             bias, residual, M, N, K, chunk);
    });
}

// out = epilogue(A . W^T + bias): the own SIMT kernel (Own) or the tf32x3 kernel (Tf32x3, where its
// copies can run, else the SIMT kernel) at conf.cuh's tiles, the epilogue fused into its stores.
int matmul_fused_forward(MatmulImpl impl, Epilogue e, float* out, const float* A, const float* W, const float* bias,
                         const float* residual, int M, int N, int K, cudaStream_t stream) {
    if (impl == MatmulImpl::Tf32x3 && matmul_tf32x3_fits(A, W, K))
        return matmul_tf32x3_sized<MATMUL_TF32X3_BM, MATMUL_TF32X3_BN, MATMUL_TF32X3_BK, MATMUL_TF32X3_WM, MATMUL_TF32X3_WN,
                                   MATMUL_TF32X3_STAGES>(e, out, A, W, bias, residual, M, N, K, stream);
    if (impl != MatmulImpl::Own && impl != MatmulImpl::Tf32x3) {
        fprintf(stderr, "matmul: only the own kernels (own, tf32x3) apply an epilogue in their stores\n");
        return -1;
    }
    return matmul_own_sized<MATMUL_BM, MATMUL_BN, MATMUL_BK, MATMUL_WM, MATMUL_WN, MATMUL_TM, MATMUL_TN, MATMUL_STAGES>(
        e, out, A, W, bias, residual, M, N, K, stream);
}

int matmul_forward(MatmulImpl impl, float* out, const float* A, const float* W, int M, int N, int K, cudaStream_t stream) {
    switch (impl) {
        case MatmulImpl::Own:
        case MatmulImpl::Tf32x3:
            return matmul_fused_forward(impl, Epilogue::None, out, A, W, nullptr, nullptr, M, N, K, stream);
        case MatmulImpl::Tiled:
            return matmul_tiled_sized<MATMUL_TILE>(out, A, W, M, N, K, stream);
        case MatmulImpl::Cublas:
#ifdef ENGINE_WITH_CUBLAS
            return matmul_cublas(out, A, W, M, N, K, stream);
#else
            fprintf(stderr, "matmul: this build has no cuBLAS (rebuild with CUBLAS=1 where libcublas is installed)\n");
            return -1;
#endif
    }
    return -1;
}
