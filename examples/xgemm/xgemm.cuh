// xgemm.cuh: C = A^T B in fp32, the shape of CLBlast's xgemm kernel, for the
// tuning knobs that kernel exposes (the auto-tuning community's GEMM space).
//
// Layouts, those of CLBlast's xgemm with its transposed-A input: At is K x M
// and B is K x N, both row-major, and C is stored column-major (Ct, N x M), so
// A's and C's rows run along m and B's along n, and each is read or written in
// vectors along that direction.
//
// Versions:
//   1. xgemm_reference_kernel: one thread per element of C, a plain K loop. The
//      correctness reference; 16 x 16 threads.
//   2. xgemm_kernel<MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB, VWM, VWN, SA, SB>:
//      a block computes an MWG x NWG tile of C with MDIMC x NDIMC threads; each
//      thread accumulates (MWG/MDIMC) x (NWG/NDIMC) elements in registers,
//      stepping through K in KWG-deep slices. SA (SB) stages A's (B's) slice in
//      shared memory, loaded by the block's threads reshaped as MDIMA (NDIMB)
//      along m (n), so a load can be shaped apart from the compute; without it
//      each thread reads its own A (B) values from global memory through the
//      read-only cache. VWM (VWN) is the vector width of every access along m
//      (n): 1, 2, 4 or 8 floats. A thread's elements are VWM-wide vectors MDIMC
//      vectors apart, so a warp's loads and stores stay contiguous.
//
// Why these knobs interact (what makes the space hard to search): the
// thread-tile MWG/MDIMC x NWG/NDIMC sets the registers (over 128 accumulators,
// it spills), the vector widths must divide it, staging pays only where the
// reuse across threads is large, and MDIMA/NDIMB matter only where staged.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path, through -I$(CONF_DIR)) may set; XGEMM_CHECK_CONFIG's
// static_asserts say what is legal, so an illegal combination fails to compile
// with a message that names the rule, and a sweep records it as skipped.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#ifndef XGEMM_MWG
#define XGEMM_MWG 64     // rows (m) of C per block
#endif
#ifndef XGEMM_NWG
#define XGEMM_NWG 64     // columns (n) of C per block
#endif
#ifndef XGEMM_KWG
#define XGEMM_KWG 32     // depth of one K slice
#endif
#ifndef XGEMM_MDIMC
#define XGEMM_MDIMC 16   // threads along m in the compute
#endif
#ifndef XGEMM_NDIMC
#define XGEMM_NDIMC 16   // threads along n in the compute
#endif
#ifndef XGEMM_MDIMA
#define XGEMM_MDIMA 16   // threads along m when staging A
#endif
#ifndef XGEMM_NDIMB
#define XGEMM_NDIMB 16   // threads along n when staging B
#endif
#ifndef XGEMM_VWM
#define XGEMM_VWM 2      // floats per access along m
#endif
#ifndef XGEMM_VWN
#define XGEMM_VWN 2      // floats per access along n
#endif
#ifndef XGEMM_SA
#define XGEMM_SA 1       // 1: stage A's slice in shared memory
#endif
#ifndef XGEMM_SB
#define XGEMM_SB 1       // 1: stage B's slice in shared memory
#endif

// The K loop is unrolled by this much (CLBlast's KWI; fixed, as in the space).
#define XGEMM_KWI 2

// The rules of a legal configuration, as one compile-time check per rule; the
// message names the macros, so a sweep's "skipped" says which rule.
template <int MWG, int NWG, int KWG, int MDIMC, int NDIMC, int MDIMA, int NDIMB, int VWM, int VWN, int SA, int SB>
struct XgemmConfigCheck {
    static_assert(VWM == 1 || VWM == 2 || VWM == 4 || VWM == 8, "XGEMM_VWM must be 1, 2, 4 or 8");
    static_assert(VWN == 1 || VWN == 2 || VWN == 4 || VWN == 8, "XGEMM_VWN must be 1, 2, 4 or 8");
    static_assert(MDIMC * NDIMC <= 1024, "XGEMM_MDIMC*XGEMM_NDIMC threads must be <= 1024 (a block's limit)");
    static_assert(MWG % (MDIMC * VWM) == 0,
                  "XGEMM_MWG must be a multiple of XGEMM_MDIMC*XGEMM_VWM (whole vectors per thread along m)");
    static_assert(NWG % (NDIMC * VWN) == 0,
                  "XGEMM_NWG must be a multiple of XGEMM_NDIMC*XGEMM_VWN (whole vectors per thread along n)");
    static_assert(MWG % (MDIMA * VWM) == 0,
                  "XGEMM_MWG must be a multiple of XGEMM_MDIMA*XGEMM_VWM (A's slice loads in whole vectors)");
    static_assert(NWG % (NDIMB * VWN) == 0,
                  "XGEMM_NWG must be a multiple of XGEMM_NDIMB*XGEMM_VWN (B's slice loads in whole vectors)");
    static_assert((MDIMC * NDIMC) % MDIMA == 0 && KWG % (MDIMC * NDIMC / MDIMA) == 0,
                  "XGEMM_KWG must be a multiple of XGEMM_MDIMC*XGEMM_NDIMC/XGEMM_MDIMA (the threads staging A along k)");
    static_assert((MDIMC * NDIMC) % NDIMB == 0 && KWG % (MDIMC * NDIMC / NDIMB) == 0,
                  "XGEMM_KWG must be a multiple of XGEMM_MDIMC*XGEMM_NDIMC/XGEMM_NDIMB (the threads staging B along k)");
    static_assert(KWG % XGEMM_KWI == 0, "XGEMM_KWG must be a multiple of 2 (the K loop's unroll)");
    static_assert((SA ? KWG * MWG : 0) * 4 + (SB ? KWG * NWG : 0) * 4 <= 48 * 1024,
                  "the staged slices, (SA*MWG + SB*NWG)*KWG*4 bytes, must fit 48 KB of static shared memory");
    static constexpr bool ok = true;
};

// VW consecutive floats, aligned so one access moves them (8: two 16-byte accesses).
template <int VW>
struct alignas(VW >= 4 ? 16 : 4 * VW) FloatVec {
    float v[VW];
};

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

// C[m][n] = sum_k At[k][m] * B[k][n], stored at Ct[n * M + m].
static __global__ void xgemm_reference_kernel(int M, int N, int K, const float* At, const float* B, float* Ct) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    int n = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += At[(size_t)k * M + m] * B[(size_t)k * N + n];
    Ct[(size_t)n * M + m] = acc;
}

// M, N and K must be multiples of MWG, NWG and KWG (the host checks): the
// kernel has no edge handling, as CLBlast's xgemm has none (its callers pad).
template <int MWG, int NWG, int KWG, int MDIMC, int NDIMC, int MDIMA, int NDIMB, int VWM, int VWN, int SA, int SB>
__global__ void __launch_bounds__(MDIMC * NDIMC)
xgemm_kernel(int M, int N, int K, const float* __restrict__ At, const float* __restrict__ B, float* __restrict__ Ct) {
    static_assert(XgemmConfigCheck<MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB, VWM, VWN, SA, SB>::ok, "");
    using VecM = FloatVec<VWM>;
    using VecN = FloatVec<VWN>;
    constexpr int THREADS = MDIMC * NDIMC;
    constexpr int MWI = MWG / MDIMC, NWI = NWG / NDIMC;   // a thread's elements along m and n
    constexpr int MVI = MWI / VWM, NVI = NWI / VWN;       // ... in vectors
    constexpr int KDIMA = THREADS / MDIMA, KDIMB = THREADS / NDIMB;
    // A slice of zero size is still declared (a zero-length array is not C++).
    __shared__ VecM As[SA ? KWG : 1][SA ? MWG / VWM : 1];
    __shared__ VecN Bs[SB ? KWG : 1][SB ? NWG / VWN : 1];

    const int tid = threadIdx.x;
    const int tid_m = tid % MDIMC, tid_n = tid / MDIMC;
    const int m0v = blockIdx.x * (MWG / VWM), n0v = blockIdx.y * (NWG / VWN);   // the tile's first vector
    const int Mv = M / VWM, Nv = N / VWN;                                      // vectors per row
    const VecM* Av = reinterpret_cast<const VecM*>(At);
    const VecN* Bv = reinterpret_cast<const VecN*>(B);

    float acc[MWI][NWI] = {};
    for (int k0 = 0; k0 < K; k0 += KWG) {
        if (SA) {
            const int tm = tid % MDIMA, tk = tid / MDIMA;
#pragma unroll
            for (int kia = 0; kia < KWG / KDIMA; ++kia)
#pragma unroll
                for (int mia = 0; mia < MWG / (MDIMA * VWM); ++mia) {
                    int k = kia * KDIMA + tk, mv = mia * MDIMA + tm;
                    As[k][mv] = Av[(size_t)(k0 + k) * Mv + m0v + mv];
                }
        }
        if (SB) {
            const int tn = tid % NDIMB, tk = tid / NDIMB;
#pragma unroll
            for (int kib = 0; kib < KWG / KDIMB; ++kib)
#pragma unroll
                for (int nib = 0; nib < NWG / (NDIMB * VWN); ++nib) {
                    int k = kib * KDIMB + tk, nv = nib * NDIMB + tn;
                    Bs[k][nv] = Bv[(size_t)(k0 + k) * Nv + n0v + nv];
                }
        }
        if (SA || SB) __syncthreads();
#pragma unroll 2  // XGEMM_KWI (a pragma does not expand macros)
        for (int k = 0; k < KWG; ++k) {
            VecM a[MVI];
            VecN b[NVI];
#pragma unroll
            for (int mi = 0; mi < MVI; ++mi) {
                int mv = mi * MDIMC + tid_m;
                a[mi] = SA ? As[k][mv] : Av[(size_t)(k0 + k) * Mv + m0v + mv];
            }
#pragma unroll
            for (int ni = 0; ni < NVI; ++ni) {
                int nv = ni * NDIMC + tid_n;
                b[ni] = SB ? Bs[k][nv] : Bv[(size_t)(k0 + k) * Nv + n0v + nv];
            }
#pragma unroll
            for (int mi = 0; mi < MVI; ++mi)
#pragma unroll
                for (int v = 0; v < VWM; ++v)
#pragma unroll
                    for (int ni = 0; ni < NVI; ++ni)
#pragma unroll
                        for (int w = 0; w < VWN; ++w) acc[mi * VWM + v][ni * VWN + w] += a[mi].v[v] * b[ni].v[w];
        }
        if (SA || SB) __syncthreads();   // the slices are overwritten next
    }
    VecM* Cv = reinterpret_cast<VecM*>(Ct);
#pragma unroll
    for (int ni = 0; ni < NVI; ++ni)
#pragma unroll
        for (int w = 0; w < VWN; ++w) {
            int n = (n0v + ni * NDIMC + tid_n) * VWN + w;
#pragma unroll
            for (int mi = 0; mi < MVI; ++mi) {
                VecM c;
#pragma unroll
                for (int v = 0; v < VWM; ++v) c.v[v] = acc[mi * VWM + v][ni * VWN + w];
                Cv[(size_t)n * Mv + m0v + mi * MDIMC + tid_m] = c;
            }
        }
}

// ---------------------------------------------------------------------------
// Launchers: they own the grid arithmetic and check the launch at once.
// ---------------------------------------------------------------------------

inline bool xgemm_reference(int M, int N, int K, const float* At, const float* B, float* Ct, cudaStream_t stream = 0) {
    dim3 block(16, 16);
    xgemm_reference_kernel<<<dim3(CEIL_DIV(M, 16), CEIL_DIV(N, 16)), block, 0, stream>>>(M, N, K, At, B, Ct);
    return cudaCheck(cudaGetLastError());
}

// One configuration's kernel at M x N x K (multiples of its MWG, NWG, KWG).
template <int MWG, int NWG, int KWG, int MDIMC, int NDIMC, int MDIMA, int NDIMB, int VWM, int VWN, int SA, int SB>
inline cudaError_t xgemm_launch(int M, int N, int K, const float* At, const float* B, float* Ct, cudaStream_t stream = 0) {
    dim3 grid(M / MWG, N / NWG);
    xgemm_kernel<MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB, VWM, VWN, SA, SB>
        <<<grid, MDIMC * NDIMC, 0, stream>>>(M, N, K, At, B, Ct);
    return cudaGetLastError();
}

// The configuration conf.cuh (or the defaults) names.
#define XGEMM_CONFIG XGEMM_MWG, XGEMM_NWG, XGEMM_KWG, XGEMM_MDIMC, XGEMM_NDIMC, XGEMM_MDIMA, XGEMM_NDIMB, \
                     XGEMM_VWM, XGEMM_VWN, XGEMM_SA, XGEMM_SB
#define XGEMM_THREADS (XGEMM_MDIMC * XGEMM_NDIMC)
static_assert(XgemmConfigCheck<XGEMM_CONFIG>::ok, "");

inline bool xgemm(int M, int N, int K, const float* At, const float* B, float* Ct, cudaStream_t stream = 0) {
    return cudaCheck((xgemm_launch<XGEMM_CONFIG>(M, N, K, At, B, Ct, stream)));
}
