// matmul_simt.cuh: the engine's SIMT matmul (--matmul own), plain FP32 FMAs:
// matmul.cuh's version 2, which describes it and holds its launch sizes
// (MATMUL_BM ... MATMUL_STAGES) and its launcher (matmul_own_sized). Split-K
// and the workspace are matmul_splitk.cuh's, shared with the tf32x3 kernel.
#pragma once
#include "common.cuh"

// Shared memory holds STAGES slices of BK columns of K, each staged transposed
// (As[k][m], Ws[k][n]) so a thread reads its fragment as float4s. The copy
// engine (cp.async, 4 bytes each: a 4-byte copy may land anywhere, which is what
// lets it transpose) fills slices STAGES-1 ahead of the FMAs, with no registers
// held for the loads and one barrier per slice. Zero-filled copies pad the
// edges, so any M, N, K (and any alignment) works without a second code path.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES>
struct MatmulTiles {
    static constexpr int LANES_M = WM / TM, LANES_N = WN / TN;   // a warp's lanes: LANES_M x LANES_N
    static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
    static constexpr int THREADS = WARPS_M * WARPS_N * 32;
    static constexpr int PM = BM + 4, PN = BN + 4;  // +4 floats: 16-byte rows, transposed stores spread over banks
    static constexpr int STAGE_FLOATS = BK * (PM + PN);
    static constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_FLOATS * sizeof(float);
    // 8x8 or smaller thread tiles fit in 128 registers: ask for 512 resident
    // threads (two 256-thread blocks) per multiprocessor, so one block's barrier
    // wait hides behind another's FMAs. Larger thread tiles get what fits.
    static constexpr int MIN_BLOCKS = TM * TN <= 64 && THREADS <= 512 ? 512 / THREADS : 1;
    static_assert(LANES_M * LANES_N == 32, "a warp's 32 lanes tile its WM x WN tile in TM x TN patches");
    static_assert(THREADS % BK == 0, "each thread stages one fixed column of every BK-wide slice");
};

// The copies of one operand (ROWS rows of a row-major R x K matrix) that one
// thread issues per slice: always column kk = tid % BK of the slice, rows
// tid / BK + i * (NT / BK). One base pointer and a row step stand for all of
// them (a pointer per row would not fit in registers beside the accumulators).
template <int ROWS, int BK, int NT, int P>
struct MatmulOperand {
    static constexpr int COPIES = (ROWS * BK + NT - 1) / NT, ROW_STEP = NT / BK;
    const float* base;  // (r0 + tid / BK, kk)
    int step;           // ROW_STEP * K
    int rows_ok;        // how many of this thread's rows lie inside the matrix
    int kk, first;
    bool all_rows;      // the whole tile lies inside the matrix

    __device__ __forceinline__ MatmulOperand(const float* G, int r0, int R, int K) {
        kk = threadIdx.x % BK;
        first = threadIdx.x / BK;
        const int left = R - r0 - first;  // rows from this thread's first to the matrix's end
        rows_ok = left <= 0 ? 0 : min(COPIES, (left + ROW_STEP - 1) / ROW_STEP);
        all_rows = r0 + ROWS <= R;
        base = G + (size_t)min(r0 + first, R - 1) * K + kk;
        step = ROW_STEP * K;
    }
    // Slice starting at column k0 (< ke, the end of this block's K range) into S[BK][P].
    __device__ __forceinline__ void stage(float* S, int k0, int ke) const {
        float* dst = S + kk * P + first;
        if (all_rows && k0 + BK <= ke) {  // the common case: no guards
#pragma unroll
            for (int i = 0; i < COPIES; ++i) {
                if (ROWS * BK % NT != 0 && first + i * ROW_STEP >= ROWS) break;
                cp_async_f32(dst + i * ROW_STEP, base + (i * step + k0));
            }
        } else {
            const bool k_ok = k0 + kk < ke;
#pragma unroll
            for (int i = 0; i < COPIES; ++i) {
                if (ROWS * BK % NT != 0 && first + i * ROW_STEP >= ROWS) break;
                cp_async_f32(dst + i * ROW_STEP, base + (i * step + k0), k_ok && i < rows_ok);
            }
        }
    }
};

// Stores a thread's TM x TN results (4x4 patches strided across the warp tile),
// applying the epilogue; float4 stores where the row allows.
template <Epilogue E, int TM, int TN, int STRIDE_M, int STRIDE_N>
__device__ __forceinline__ void matmul_store(float* out, const float (&acc)[TM][TN], int m_base, int n_base, int M, int N,
                                             const float* bias, const float* residual, bool vec) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m_base + (i / 4) * STRIDE_M + i % 4;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int n = n_base + (j / 4) * STRIDE_N;
            const long long at = (long long)m * N + n;
            if (vec && n + 3 < N) {
                float4 v = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
                if constexpr (E != Epilogue::None) {
                    const float4 b = *reinterpret_cast<const float4*>(bias + n);
                    v.x += b.x; v.y += b.y; v.z += b.z; v.w += b.w;
                    if constexpr (E == Epilogue::BiasGelu) {
                        v.x = gelu_tanh(v.x); v.y = gelu_tanh(v.y); v.z = gelu_tanh(v.z); v.w = gelu_tanh(v.w);
                    }
                    if constexpr (E == Epilogue::BiasResidual) {
                        const float4 r = *reinterpret_cast<const float4*>(residual + at);
                        v.x += r.x; v.y += r.y; v.z += r.z; v.w += r.w;
                    }
                }
                *reinterpret_cast<float4*>(out + at) = v;
            } else {
#pragma unroll
                for (int jj = 0; jj < 4; ++jj)
                    if (n + jj < N) out[at + jj] = epilogue_apply<E>(acc[i][j + jj], bias, n + jj, residual, at + jj);
            }
        }
    }
}

// blockIdx.z selects a slice of K (split-K): slice z covers [z*k_chunk, (z+1)*k_chunk)
// and writes its raw partial tile to out + z*M*N (E is None then), which
// matmul_splitk_reduce_kernel sums and finishes with the epilogue.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, Epilogue E>
__global__ void __launch_bounds__(MatmulTiles<BM, BN, BK, WM, WN, TM, TN, STAGES>::THREADS,
                                  MatmulTiles<BM, BN, BK, WM, WN, TM, TN, STAGES>::MIN_BLOCKS)
    matmul_kernel(float* out, const float* __restrict__ A, const float* __restrict__ W, const float* __restrict__ bias,
                  const float* residual, int M, int N, int K, int k_chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    static_assert(BM < 0, "matmul_kernel needs cp.async: build for sm_80 or newer");
#endif
    using T = MatmulTiles<BM, BN, BK, WM, WN, TM, TN, STAGES>;
    extern __shared__ __align__(16) float smem[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm0 = (warp / T::WARPS_N) * WM, wn0 = (warp % T::WARPS_N) * WN;
    const int lm = lane % T::LANES_M, ln = lane / T::LANES_M;  // lm fastest: a quarter warp reads 8 distinct A float4s
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kb = blockIdx.z * k_chunk, ke = min(K, kb + k_chunk);
    const int slices = (ke - kb + BK - 1) / BK;
    out += (size_t)blockIdx.z * M * N;

    const MatmulOperand<BM, BK, T::THREADS, T::PM> a_src(A, m0, M, K);
    const MatmulOperand<BN, BK, T::THREADS, T::PN> w_src(W, n0, N, K);
    auto stage_slice = [&](int s) {  // slice s into stage s % STAGES, always one commit group
        if (s < slices) {
            float* S = smem + (s % STAGES) * T::STAGE_FLOATS;
            a_src.stage(S, kb + s * BK, ke);
            w_src.stage(S + BK * T::PM, kb + s * BK, ke);
        }
        cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) stage_slice(s);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int s = 0; s < slices; ++s) {
        cp_async_wait<STAGES - 2>();  // slice s has landed (for this thread's copies)...
        __syncthreads();              // ...and everyone's; and everyone is done with slice s-1's stage
        stage_slice(s + STAGES - 1);  // refills the stage slice s-1 used
        const float* As = smem + (s % STAGES) * T::STAGE_FLOATS;
        const float* Ws = As + BK * T::PM;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], w[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(As + k * T::PM + wm0 + (i / 4) * T::LANES_M * 4 + lm * 4);
                a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(Ws + k * T::PN + wn0 + (j / 4) * T::LANES_N * 4 + ln * 4);
                w[j] = v.x; w[j + 1] = v.y; w[j + 2] = v.z; w[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], w[j], acc[i][j]);
        }
    }
    cp_async_wait<0>();  // no copy may still be in flight when the block exits

    const bool vec = (N % 4) == 0 && aligned16(out) && (E == Epilogue::None || aligned16(bias)) &&
                     (E != Epilogue::BiasResidual || aligned16(residual));
    matmul_store<E, TM, TN, T::LANES_M * 4, T::LANES_N * 4>(out, acc, m0 + wm0 + lm * 4, n0 + wn0 + ln * 4, M, N, bias,
                                                            residual, vec);
}
