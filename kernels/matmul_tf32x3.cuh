// matmul_tf32x3.cuh: out[M, N] = inp[M, K] . weight[N, K]^T on the tensor cores at
// FP32 accuracy ("3xTF32", as CUTLASS's tensorop 3xTF32 GEMMs).
//
// A TF32 tensor-core product keeps 10 of FP32's 23 mantissa bits, too few for
// an FP32 model (its greedy tokens must stay transformers'). Each operand is
// therefore split into a TF32 part and the remainder, x = big + small with
// big = tf32(x), and a.b is summed as big_a.big_b + big_a.small_b +
// small_a.big_b (small.small, below 2^-22 of the product, is dropped); each
// slice's sums are then added in FP32 (see the mainloop). Three mma.sync per
// product still outrun FP32 FMAs where the tensor cores are several times
// faster (Ampere, Hopper): on an H100 1.02-1.41x cuBLAS SGEMM on GPT-2's
// shapes, with a third of its error against FP64 (kernel_check and
// matmul_tiles measure both).
//
// Shape: a block of (BM/WM)*(BN/WN) warps computes a BM x BN tile, each warp
// WM x WN of it as (WM/16) x (WN/8) mma.m16n8k8 tiles. Both operands run along
// K in memory, so 16-byte cp.async copies stage BK-wide slices of them,
// untransposed, into a STAGES-deep ring of shared memory while older slices
// feed the MMAs. A lane's four k positions of an m16n8k8 are taken from four
// adjacent floats (the k order inside an MMA is free so long as both operands
// agree), one 16-byte shared load per row feeding two MMAs; odd rows' 16-byte
// chunks are swizzled (chunk ^ BK/8) so a quarter warp's loads hit distinct
// banks. The epilogue (bias, gelu, residual) is applied in the stores; split-K
// is matmul.cuh's, shared with the SIMT kernel.
//
// Needs sm_80 or newer, K a multiple of 4 and 16-byte aligned operands (the
// launcher runs the SIMT kernel otherwise). Its launch sizes (MATMUL_TF32X3_*)
// are matmul.cuh's, with the family's other macros.
#pragma once
#include "common.cuh"

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
struct MatmulTf32x3Tiles {
    static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
    static constexpr int THREADS = WARPS_M * WARPS_N * 32;
    static constexpr int MT = WM / 16, NT = WN / 8;          // a warp's mma tiles
    static constexpr int STAGE_FLOATS = (BM + BN) * BK;
    static constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_FLOATS * sizeof(float);
    static_assert(WM % 16 == 0 && WN % 8 == 0, "a warp tile is made of 16 x 8 mma tiles");
    static_assert(BM % WM == 0 && BN % WN == 0, "warps tile the block");
    static_assert(BK % 16 == 0, "a slice is whole 16-wide k steps (one 16-byte load per row feeds two MMAs)");
};

// Row r's 16-byte chunk c of a slice, swizzled: odd rows move by half a slice, so the two rows a
// quarter warp reads land in different banks.
template <int BK>
__device__ __forceinline__ int tf32x3_chunk_at(int r, int c) {
    return r * BK + ((c ^ ((r & 1) * (BK / 8))) << 2);
}

// x = big + small: big the nearest TF32, small the nearest TF32 to the rest (x - big is exact in FP32).
__device__ __forceinline__ void tf32_split(float x, unsigned& big, unsigned& small) {
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(small) : "f"(x - __uint_as_float(big)));
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// f(a, b) for each of a warp's mma accumulators a (b: the same one of `other`, or 0).
template <int MT, int NT, class F>
__device__ __forceinline__ void tf32x3_each(float (&acc)[MT][NT][4], F f, const float (&other)[MT][NT][4] = {}) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) f(acc[i][j][c], other[i][j][c]);
}

// Copies one operand's slice (ROWS rows of a row-major R x K matrix from row r0, columns
// [k0, k0 + BK) within [.., ke)) into S, zero-filling rows past R and columns past ke.
template <int ROWS, int BK, int NT>
__device__ __forceinline__ void tf32x3_stage(float* S, const float* G, int r0, int R, int K, int k0, int ke) {
    constexpr int CHUNKS = BK / 4, TOTAL = ROWS * CHUNKS;
#pragma unroll
    for (int q0 = 0; q0 < TOTAL; q0 += NT) {
        const int q = q0 + threadIdx.x;
        if (TOTAL % NT != 0 && q >= TOTAL) break;
        const int r = q / CHUNKS, c = q % CHUNKS, k = k0 + 4 * c;
        const bool ok = r0 + r < R && k < ke;
        const float* src = G + (size_t)(ok ? r0 + r : 0) * K + (ok ? k : 0);
        cp_async_16(S + tf32x3_chunk_at<BK>(r, c), src, ok);
    }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, Epilogue E>
__global__ void __launch_bounds__(MatmulTf32x3Tiles<BM, BN, BK, WM, WN, STAGES>::THREADS)
    matmul_tf32x3_kernel(float* out, const float* __restrict__ A, const float* __restrict__ W, const float* __restrict__ bias,
                     const float* residual, int M, int N, int K, int k_chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    static_assert(BM < 0, "matmul_tf32x3_kernel needs TF32 mma.sync and cp.async: build for sm_80 or newer");
#endif
    using T = MatmulTf32x3Tiles<BM, BN, BK, WM, WN, STAGES>;
    extern __shared__ __align__(16) float smem[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;   // mma fragment coordinates: row group, thread in group
    const int wm0 = (warp / T::WARPS_N) * WM, wn0 = (warp % T::WARPS_N) * WN;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kb = blockIdx.z * k_chunk, ke = min(K, kb + k_chunk);
    const int slices = (ke - kb + BK - 1) / BK;
    out += (size_t)blockIdx.z * M * N;

    auto stage_slice = [&](int s) {  // slice s into stage s % STAGES, always one commit group
        if (s < slices) {
            float* S = smem + (s % STAGES) * T::STAGE_FLOATS;
            tf32x3_stage<BM, BK, T::THREADS>(S, A, m0, M, K, kb + s * BK, ke);
            tf32x3_stage<BN, BK, T::THREADS>(S + BM * BK, W, n0, N, K, kb + s * BK, ke);
        }
        cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) stage_slice(s);

    float acc[T::MT][T::NT][4];
    tf32x3_each(acc, [](float& a, float) { a = 0.0f; });

    for (int s = 0; s < slices; ++s) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        stage_slice(s + STAGES - 1);
        const float* As = smem + (s % STAGES) * T::STAGE_FLOATS;
        const float* Ws = As + BM * BK;
        float part[T::MT][T::NT][4];    // this slice's sums, added to acc in FP32 after it (see below)
        tf32x3_each(part, [](float& p, float) { p = 0.0f; });
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            float4 a[T::MT][2], b[T::NT];   // a lane's 4 adjacent k of rows g and g + 8; of column g
#pragma unroll
            for (int i = 0; i < T::MT; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    a[i][h] = *reinterpret_cast<const float4*>(As + tf32x3_chunk_at<BK>(wm0 + 16 * i + 8 * h + g, 4 * kk + t));
#pragma unroll
            for (int j = 0; j < T::NT; ++j)
                b[j] = *reinterpret_cast<const float4*>(Ws + tf32x3_chunk_at<BK>(wn0 + 8 * j + g, 4 * kk + t));
#pragma unroll
            for (int half = 0; half < 2; ++half) {  // k positions (0, 1) then (2, 3) of each lane's four
                unsigned ab[T::MT][4], as[T::MT][4], bb[T::NT][2], bs[T::NT][2];
#pragma unroll
                for (int i = 0; i < T::MT; ++i) {
                    tf32_split(half ? a[i][0].z : a[i][0].x, ab[i][0], as[i][0]);
                    tf32_split(half ? a[i][1].z : a[i][1].x, ab[i][1], as[i][1]);
                    tf32_split(half ? a[i][0].w : a[i][0].y, ab[i][2], as[i][2]);
                    tf32_split(half ? a[i][1].w : a[i][1].y, ab[i][3], as[i][3]);
                }
#pragma unroll
                for (int j = 0; j < T::NT; ++j) {
                    tf32_split(half ? b[j].z : b[j].x, bb[j][0], bs[j][0]);
                    tf32_split(half ? b[j].w : b[j].y, bb[j][1], bs[j][1]);
                }
#pragma unroll
                for (int i = 0; i < T::MT; ++i)
#pragma unroll
                    for (int j = 0; j < T::NT; ++j) {  // the small terms first: they lose least in the running sum
                        mma_tf32(part[i][j], as[i], bb[j]);
                        mma_tf32(part[i][j], ab[i], bs[j]);
                        mma_tf32(part[i][j], ab[i], bb[j]);
                    }
            }
        }
        // Accumulated in the tensor cores over all of K (96 to 384 MMA steps) the error measured 5e-6
        // of the result against cuBLAS (1e-5 at K 3072; H100, matmul_tiles): their adds do not round
        // to nearest as FP32's do. A slice's few steps start from zero instead, and FP32 adds carry
        // the sum: 0.4-0.6e-7 against FP64 at the default tiles, a third of cuBLAS SGEMM's.
        tf32x3_each(acc, [](float& a, float p) { a += p; }, part);
    }
    cp_async_wait<0>();

    const bool vec = (N % 2) == 0 && ((reinterpret_cast<uintptr_t>(out) & 7u) == 0) &&
                     (E != Epilogue::BiasResidual || (reinterpret_cast<uintptr_t>(residual) & 7u) == 0);
#pragma unroll
    for (int i = 0; i < T::MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm0 + 16 * i + 8 * h + g;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < T::NT; ++j) {
                const int n = n0 + wn0 + 8 * j + 2 * t;
                const long long at = (long long)m * N + n;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (vec && n + 1 < N) {
                    *reinterpret_cast<float2*>(out + at) = make_float2(epilogue_apply<E>(v0, bias, n, residual, at),
                                                                       epilogue_apply<E>(v1, bias, n + 1, residual, at + 1));
                } else {
                    if (n < N) out[at] = epilogue_apply<E>(v0, bias, n, residual, at);
                    if (n + 1 < N) out[at + 1] = epilogue_apply<E>(v1, bias, n + 1, residual, at + 1);
                }
            }
        }
}
