// matmul.cuh: the linear layers, out[M, N] = inp[M, K] . weight[N, K]^T
// (weights stored as llm.c does, one output channel per row, so both operands
// run along K). Bias and activation follow in prepare.cuh, except in matvec.
//
// Versions, chosen at run time by MatmulImpl (programs' --matmul flag):
//   1. matmul_tiled_kernel (--matmul tiled): the textbook shared-memory tiled
//      kernel, one output per thread in a TILE x TILE block (seed 001's first
//      approach; seed 004's FP tile). Padded tiles avoid bank conflicts.
//   2. matmul_kernel (--matmul own, the default): register-blocked. A block
//      computes a BM x BN tile through BK-deep slices of A and W staged
//      transposed in shared memory; each thread keeps a TM x TN tile of
//      accumulators in registers, so every shared-memory load feeds TM or TN
//      FMAs. Loads are float4 along K when K % 4 == 0. Shared memory is double
//      buffered: the next slice's global loads are issued before the current
//      slice's FMAs and stored after them, one barrier per slice. Tile rows are
//      padded by 4 floats so the transposed stores spread over the banks.
//      A grid with fewer blocks than multiprocessors splits K across blocks
//      (split-K) and sums the slices in a second kernel, in a fixed order.
//   3. cuBLAS SGEMM (--matmul cublas): the reference path (FP32, no TF32).
//   4. matvec_kernel: for M <= MATVEC_MAX_ROWS (decoding, short prefills with
//      --matmul own), one warp per output column, so all of N's columns run at
//      once instead of N/BN blocks; each weight row is read once for all M rows.
//      The bias/gelu/residual epilogue is fused: a launch per step matters there.
#pragma once
#include <algorithm>

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
#define MATMUL_BK 8
#endif
#ifndef MATMUL_TM
#define MATMUL_TM 8
#endif
#ifndef MATMUL_TN
#define MATMUL_TN 8
#endif
static_assert(MATMUL_TM >= 1 && MATMUL_TN >= 1 && MATMUL_BM % MATMUL_TM == 0 && MATMUL_BN % MATMUL_TN == 0,
              "MATMUL_BM must be a multiple of MATMUL_TM and MATMUL_BN a multiple of MATMUL_TN");
static_assert((MATMUL_BM / MATMUL_TM) * (MATMUL_BN / MATMUL_TN) >= 32 &&
                  (MATMUL_BM / MATMUL_TM) * (MATMUL_BN / MATMUL_TN) <= 1024,
              "MATMUL threads per block, (BM/TM)*(BN/TN), must be between 32 and 1024");
static_assert(MATMUL_BK % 4 == 0, "MATMUL_BK must be a multiple of 4 (tiles load float4 along K)");
static_assert(2 * (MATMUL_BM + MATMUL_BN + 8) * MATMUL_BK * 4 <= 48 * 1024,
              "MATMUL tiles need 2*(BM+BN+8)*BK*4 bytes of shared memory (double-buffered), over the 48 KB static limit");
static_assert(MATMUL_TM * MATMUL_TN <= 256, "MATMUL_TM * MATMUL_TN accumulators per thread must be <= 256 (registers)");

#ifndef MATVEC_BLOCK_SIZE
#define MATVEC_BLOCK_SIZE 256
#endif
#ifndef MATVEC_MAX_ROWS
#define MATVEC_MAX_ROWS 8
#endif
static_assert(MATVEC_BLOCK_SIZE % 32 == 0 && MATVEC_BLOCK_SIZE >= 32 && MATVEC_BLOCK_SIZE <= 1024,
              "MATVEC_BLOCK_SIZE must be a multiple of 32 (one warp per output column) up to 1024");
static_assert(MATVEC_MAX_ROWS >= 1 && MATVEC_MAX_ROWS <= 16, "MATVEC_MAX_ROWS must be 1..16");

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

// ---- version 2: register-blocked ------------------------------------------
// One tile's global loads, held in registers so they can be issued before the
// current tile's FMAs and stored to shared memory after them (prefetching).
// Rows r0..r0+ROWS and columns k..k+BK of the row-major R x K matrix G (ld = K),
// zero outside the matrix or past ke, the end of this block's K range.
template <int ROWS, int BK, int NT, bool VEC>
struct MatmulStage {
    static constexpr int GROUPS = VEC ? ROWS * BK / 4 : ROWS * BK;  // float4s (or floats) per tile
    static constexpr int PER_THREAD = (GROUPS + NT - 1) / NT;
    float4 v4[VEC ? PER_THREAD : 1];
    float v1[VEC ? 1 : PER_THREAD];

    __device__ __forceinline__ void load(const float* __restrict__ G, int r0, int k, int R, int K, int ke) {
#pragma unroll
        for (int i = 0; i < PER_THREAD; ++i) {
            const int g = threadIdx.x + i * NT;
            if constexpr (VEC) {  // K and ke are multiples of 4: a float4 never crosses ke
                const int r = g / (BK / 4), kq = (g % (BK / 4)) * 4;
                v4[i] = (g < GROUPS && r0 + r < R && k + kq < ke)
                            ? *reinterpret_cast<const float4*>(G + (size_t)(r0 + r) * K + k + kq)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
                const int r = g / BK, kk = g % BK;
                v1[i] = (g < GROUPS && r0 + r < R && k + kk < ke) ? G[(size_t)(r0 + r) * K + k + kk] : 0.0f;
            }
        }
    }

    // Into S[k][r], transposed, rows padded (PAD) so these strided stores spread over the banks.
    template <int PAD>
    __device__ __forceinline__ void store(float (*S)[PAD]) const {
#pragma unroll
        for (int i = 0; i < PER_THREAD; ++i) {
            const int g = threadIdx.x + i * NT;
            if (g >= GROUPS) break;
            if constexpr (VEC) {
                const int r = g / (BK / 4), kq = (g % (BK / 4)) * 4;
                S[kq + 0][r] = v4[i].x;
                S[kq + 1][r] = v4[i].y;
                S[kq + 2][r] = v4[i].z;
                S[kq + 3][r] = v4[i].w;
            } else {
                S[g % BK][g / BK] = v1[i];
            }
        }
    }
};

template <int N_>
__device__ __forceinline__ void matmul_load_regs(float (&reg)[N_], const float* src) {
    if constexpr (N_ % 4 == 0) {
#pragma unroll
        for (int i = 0; i < N_; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(src + i);
            reg[i] = v.x; reg[i + 1] = v.y; reg[i + 2] = v.z; reg[i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < N_; ++i) reg[i] = src[i];
    }
}

// blockIdx.z selects a slice of K (split-K): slice z covers [z*k_chunk, (z+1)*k_chunk)
// and writes its partial tile to out + z*M*N, which matmul_splitk_reduce_kernel sums.
template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) matmul_kernel(float* __restrict__ out, const float* __restrict__ A,
                                                                       const float* __restrict__ W, int M, int N, int K,
                                                                       int k_chunk) {
    constexpr int NT = (BM / TM) * (BN / TN);
    constexpr int PM = BM + 4, PN = BN + 4;  // +4 floats: keeps rows 16-byte aligned, moves banks
    __shared__ __align__(16) float As[2][BK][PM];
    __shared__ __align__(16) float Ws[2][BK][PN];
    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kb = blockIdx.z * k_chunk, ke = min(K, kb + k_chunk);
    out += (size_t)blockIdx.z * M * N;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float a[TM], w[TN];

    MatmulStage<BM, BK, NT, VEC> sa;
    MatmulStage<BN, BK, NT, VEC> sw;
    sa.load(A, m0, kb, M, K, ke);
    sw.load(W, n0, kb, N, K, ke);
    sa.store(As[0]);
    sw.store(Ws[0]);
    __syncthreads();

    int buf = 0;
    for (int k0 = kb; k0 < ke; k0 += BK) {
        const bool more = k0 + BK < ke;
        if (more) {  // issue the next tile's loads now; they land while we compute
            sa.load(A, m0, k0 + BK, M, K, ke);
            sw.load(W, n0, k0 + BK, N, K, ke);
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            matmul_load_regs<TM>(a, &As[buf][k][ty * TM]);
            matmul_load_regs<TN>(w, &Ws[buf][k][tx * TN]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], w[j], acc[i][j]);
        }
        if (more) {  // the other buffer: nobody reads it until after the barrier
            sa.store(As[buf ^ 1]);
            sw.store(Ws[buf ^ 1]);
        }
        __syncthreads();
        buf ^= 1;
    }

    const bool vec_store = TN % 4 == 0 && (N % 4) == 0 && (reinterpret_cast<uintptr_t>(out) & 15) == 0;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty * TM + i;
        if (m >= M) break;
        float* row = out + (size_t)m * N;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int n = n0 + tx * TN + j;
            if (vec_store && n + 3 < N) {
                *reinterpret_cast<float4*>(row + n) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            } else {
#pragma unroll
                for (int jj = 0; jj < 4 && j + jj < TN; ++jj)
                    if (n + jj < N) row[n + jj] = acc[i][j + jj];
            }
        }
    }
}

// out[i] = sum over s of partial[s * MN + i], in order (deterministic, unlike atomics).
__global__ void matmul_splitk_reduce_kernel(float* __restrict__ out, const float* __restrict__ partial, long long MN, int S) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= MN) return;
    float v = 0.0f;
    for (int s = 0; s < S; ++s) v += partial[s * MN + i];
    out[i] = v;
}

// ---- version 4: matvec (M <= MATVEC_MAX_ROWS) -----------------------------
template <int BLOCK, int ROWS, bool VEC, Epilogue E>
__global__ void __launch_bounds__(BLOCK) matvec_kernel(float* out, const float* __restrict__ A, const float* __restrict__ W,
                                                       const float* __restrict__ bias, const float* residual, int M, int N, int K) {
    const int n = blockIdx.x * (BLOCK / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (n >= N) return;  // whole warps leave together
    float acc[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc[r] = 0.0f;
    const float* wrow = W + (size_t)n * K;
    if constexpr (VEC) {
        const float4* w4 = reinterpret_cast<const float4*>(wrow);
#pragma unroll 4
        for (int k = lane; k < K / 4; k += 32) {
            const float4 wv = w4[k];
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                if (r < M) {
                    const float4 av = reinterpret_cast<const float4*>(A + (size_t)r * K)[k];
                    acc[r] += wv.x * av.x + wv.y * av.y + wv.z * av.z + wv.w * av.w;
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            const float wv = wrow[k];
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
                if (r < M) acc[r] += wv * A[(size_t)r * K + k];
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const float v = warp_sum<32>(acc[r]);
        if (lane == r && r < M) {
            const long long i = (long long)r * N + n;
            out[i] = epilogue_apply<E>(v, bias, n, residual, i);
        }
    }
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

// How many K slices a grid of `blocks` needs to put a block on every multiprocessor
// (split-K): a short-and-wide product (a 64-token prompt: 6 to 24 blocks) would
// otherwise leave most of the GPU idle while a few blocks walk all of K.
inline int matmul_split_k(long long blocks, int K, int BK) {
    static int sms = 0;
    if (!sms && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) sms = 1;
    if (blocks >= sms) return 1;
    const int max_slices = std::max(1, K / (4 * BK));  // each slice walks at least 4 tiles
    return (int)std::min<long long>(max_slices, (2LL * sms + blocks - 1) / blocks);
}

// Scratch for split-K partial tiles; grows, never shrinks (one per process).
inline float* matmul_workspace(size_t floats) {
    static float* ws = nullptr;
    static size_t have = 0;
    if (floats > have) {
        if (ws) cudaFree(ws);
        ws = nullptr;
        have = 0;
        if (cudaCheck(cudaMalloc(&ws, floats * sizeof(float)))) return nullptr;
        have = floats;
    }
    return ws;
}

template <int BM, int BN, int BK, int TM, int TN>
int matmul_own_sized(float* out, const float* A, const float* W, int M, int N, int K, cudaStream_t stream) {
    const dim3 block((BM / TM) * (BN / TN));
    dim3 grid(CEIL_DIV(N, BN), CEIL_DIV(M, BM), 1);
    if (grid.y > 65535) { fprintf(stderr, "matmul: M=%d needs %u row blocks, over CUDA's 65535\n", M, grid.y); return -1; }
    const bool vec = K % 4 == 0 && aligned16(A, W);
    int slices = matmul_split_k((long long)grid.x * grid.y, K, BK);
    int chunk = K;
    if (slices > 1) {
        chunk = CEIL_DIV(CEIL_DIV(K, slices), BK) * BK;  // whole tiles (and so multiples of 4)
        slices = CEIL_DIV(K, chunk);
    }
    float* dst = out;
    if (slices > 1 && !(dst = matmul_workspace((size_t)slices * M * N))) return -1;
    grid.z = slices;
    const int err = vec ? engine_launch("matmul", "matmul_kernel", matmul_kernel<BM, BN, BK, TM, TN, true>, grid, block, 0, stream, dst, A, W, M, N, K, chunk)
                        : engine_launch("matmul", "matmul_kernel", matmul_kernel<BM, BN, BK, TM, TN, false>, grid, block, 0, stream, dst, A, W, M, N, K, chunk);
    if (err || slices == 1) return err;
    const long long MN = (long long)M * N;
    return engine_launch("matmul", "matmul_splitk_reduce_kernel", matmul_splitk_reduce_kernel, dim3((unsigned)CEIL_DIV(MN, 256LL)),
                         dim3(256), 0, stream, out, (const float*)dst, MN, slices);
}

int matmul_forward(MatmulImpl impl, float* out, const float* A, const float* W, int M, int N, int K, cudaStream_t stream) {
    switch (impl) {
        case MatmulImpl::Own:
            return matmul_own_sized<MATMUL_BM, MATMUL_BN, MATMUL_BK, MATMUL_TM, MATMUL_TN>(out, A, W, M, N, K, stream);
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

template <int BLOCK, int ROWS>
int matvec_forward_sized(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual,
                         int M, int N, int K, cudaStream_t stream) {
    if (M > ROWS) { fprintf(stderr, "matvec: M=%d rows, over MATVEC_MAX_ROWS=%d\n", M, ROWS); return -1; }
    const dim3 grid(CEIL_DIV(N, BLOCK / 32)), block(BLOCK);
    const bool vec = K % 4 == 0 && aligned16(A, W);
#define ENGINE_MATVEC(V, EP) \
    engine_launch("matmul", "matvec_kernel", matvec_kernel<BLOCK, ROWS, V, EP>, grid, block, 0, stream, out, A, W, bias, residual, M, N, K)
    switch (e) {
        case Epilogue::None: return vec ? ENGINE_MATVEC(true, Epilogue::None) : ENGINE_MATVEC(false, Epilogue::None);
        case Epilogue::Bias: return vec ? ENGINE_MATVEC(true, Epilogue::Bias) : ENGINE_MATVEC(false, Epilogue::Bias);
        case Epilogue::BiasGelu: return vec ? ENGINE_MATVEC(true, Epilogue::BiasGelu) : ENGINE_MATVEC(false, Epilogue::BiasGelu);
        case Epilogue::BiasResidual: return vec ? ENGINE_MATVEC(true, Epilogue::BiasResidual) : ENGINE_MATVEC(false, Epilogue::BiasResidual);
    }
#undef ENGINE_MATVEC
    return -1;
}

int matvec_forward(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual, int M,
                   int N, int K, cudaStream_t stream) {
    return matvec_forward_sized<MATVEC_BLOCK_SIZE, MATVEC_MAX_ROWS>(e, out, A, W, bias, residual, M, N, K, stream);
}

int matmul_max_matvec_rows() { return MATVEC_MAX_ROWS; }
