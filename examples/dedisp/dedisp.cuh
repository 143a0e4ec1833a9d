// dedisp.cuh: incoherent dedispersion of a radio telescope's filterbank data,
// the kernel of the auto-tuning community's dedispersion space.
//
// A pulse crossing the interstellar medium arrives later at lower frequencies,
// by a delay proportional to the dispersion measure (DM). Dedispersion undoes
// it by trial: for every trial DM and every output sample, sum each frequency
// channel's sample at that channel's delay:
//
//     out[dm][s] = sum_c in[c][s + shift(c, dm)],   shift(c, dm) = trunc(dm * delay[c])
//
// in is 8-bit (samples as a receiver digitizes them), channel-major, each
// channel's row `samples + max_shift` long; delay[c] is channel c's delay in
// samples per trial-DM step (the host folds the DM step into it). The sums are
// of at most 256 * 255 and so exact in fp32: a configuration is checked for
// equality with the reference, whatever its order of summation.
//
// Versions:
//   1. dedisp_reference_kernel: one thread per output, a plain channel loop.
//   2. dedisp_kernel<BX, BY, TX, TY, SX, SY>: a block of BX x BY threads, x
//      along samples and y along DMs; each thread sums TX samples x TY DMs in
//      registers. SX (SY) says how a thread's TX samples (TY DMs) are spread:
//      0, next to each other; 1, BX (BY) apart, so the block's threads take
//      consecutive ones at each step.
//
// Why the space is shaped so (and hard to search): neighbouring DMs read
// nearly the same bytes (their shifts differ by a fraction of a sample per
// step), so a warp laid along DMs (small BX, large BY) shares cache lines
// while a warp along samples reads whole lines; a thread's TY DMs reuse one
// channel's delay and its TX samples one cache line; the registers (TX * TY
// accumulators) and the grid's size (too few blocks on a large tile) pull the
// other way. The layout of a tile (SX, SY) decides which of its loads a warp
// coalesces.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path, through -I$(CONF_DIR)) may set; DedispConfigCheck's
// static_asserts say what is legal, so an illegal combination fails to compile
// with a message that names the rule, and a sweep records it as skipped.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#include <cstdint>

#ifndef DEDISP_BLOCK_X
#define DEDISP_BLOCK_X 4      // threads along samples
#endif
#ifndef DEDISP_BLOCK_Y
#define DEDISP_BLOCK_Y 64     // threads along DMs
#endif
#ifndef DEDISP_TILE_X
#define DEDISP_TILE_X 2       // samples per thread
#endif
#ifndef DEDISP_TILE_Y
#define DEDISP_TILE_Y 2       // DMs per thread
#endif
#ifndef DEDISP_STRIDE_X
#define DEDISP_STRIDE_X 1     // 1: a thread's samples DEDISP_BLOCK_X apart; 0: adjacent
#endif
#ifndef DEDISP_STRIDE_Y
#define DEDISP_STRIDE_Y 0     // 1: a thread's DMs DEDISP_BLOCK_Y apart; 0: adjacent
#endif

// The rules of a legal configuration, one compile-time check per rule; the
// message names the macros, so a sweep's "skipped" says which rule.
template <int BX, int BY, int TX, int TY, int SX, int SY>
struct DedispConfigCheck {
    static_assert(BX >= 1 && BY >= 1 && TX >= 1 && TY >= 1, "DEDISP_BLOCK_* and DEDISP_TILE_* must be >= 1");
    static_assert(BX * BY >= 32 && BX * BY <= 1024,
                  "DEDISP_BLOCK_X*DEDISP_BLOCK_Y threads must be 32..1024 (a warp to a block's limit)");
    static_assert(SX == 0 || SX == 1, "DEDISP_STRIDE_X must be 0 or 1");
    static_assert(SY == 0 || SY == 1, "DEDISP_STRIDE_Y must be 0 or 1");
    static_assert(TX * TY <= 64, "DEDISP_TILE_X*DEDISP_TILE_Y accumulators must be <= 64 (registers)");
    static constexpr bool ok = true;
};

struct DedispProblem {
    int samples = 8192;     // output samples per DM
    int dms = 2048;         // trial DMs
    int channels = 256;     // frequency channels
    int max_shift = 256;    // the input row's slack past `samples`; > every shift (the host checks)
    __host__ __device__ int row() const { return samples + max_shift; }
};

// A channel's shift at a DM, computed one way in every kernel (round-to-nearest
// product, truncation) so that all agree on which sample they sum.
__device__ __forceinline__ int dedisp_shift(int dm, float delay) { return __float2int_rz(__fmul_rn(float(dm), delay)); }

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

static __global__ void dedisp_reference_kernel(DedispProblem p, const uint8_t* in, const float* delay, float* out) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    int dm = blockIdx.y * blockDim.y + threadIdx.y;
    if (s >= p.samples || dm >= p.dms) return;
    float acc = 0.0f;
    for (int c = 0; c < p.channels; ++c) acc += float(in[(size_t)c * p.row() + s + dedisp_shift(dm, delay[c])]);
    out[(size_t)dm * p.samples + s] = acc;
}

template <int BX, int BY, int TX, int TY, int SX, int SY>
__global__ void __launch_bounds__(BX * BY)
dedisp_kernel(DedispProblem p, const uint8_t* __restrict__ in, const float* __restrict__ delay, float* __restrict__ out) {
    static_assert(DedispConfigCheck<BX, BY, TX, TY, SX, SY>::ok, "");
    // The block's tile is (BX*TX) samples x (BY*TY) DMs; thread (x, y) owns
    // sample s0 + i*dx and DM d0 + j*dy of it.
    const int s0 = blockIdx.x * BX * TX + (SX ? threadIdx.x : threadIdx.x * TX), dx = SX ? BX : 1;
    const int d0 = blockIdx.y * BY * TY + (SY ? threadIdx.y : threadIdx.y * TY), dy = SY ? BY : 1;
    float acc[TY][TX] = {};
    for (int c = 0; c < p.channels; ++c) {
        const float dc = __ldg(delay + c);
        const uint8_t* row = in + (size_t)c * p.row();
#pragma unroll
        for (int j = 0; j < TY; ++j) {
            // a DM past the last (a partial tile) reads the last one's samples, so no load leaves
            // the input; only its store is skipped
            const uint8_t* shifted = row + dedisp_shift(min(d0 + j * dy, p.dms - 1), dc);
#pragma unroll
            for (int i = 0; i < TX; ++i) {
                const int s = s0 + i * dx;
                if (s < p.samples) acc[j][i] += float(__ldg(shifted + s));
            }
        }
    }
#pragma unroll
    for (int j = 0; j < TY; ++j) {
        const int dm = d0 + j * dy;
        if (dm >= p.dms) continue;
#pragma unroll
        for (int i = 0; i < TX; ++i) {
            const int s = s0 + i * dx;
            if (s < p.samples) out[(size_t)dm * p.samples + s] = acc[j][i];
        }
    }
}

// ---------------------------------------------------------------------------
// Launchers: they own the grid arithmetic and check the launch at once.
// ---------------------------------------------------------------------------

inline bool dedisp_reference(const DedispProblem& p, const uint8_t* in, const float* delay, float* out,
                             cudaStream_t stream = 0) {
    dim3 block(32, 8);
    dedisp_reference_kernel<<<dim3(CEIL_DIV(p.samples, 32), CEIL_DIV(p.dms, 8)), block, 0, stream>>>(p, in, delay, out);
    return cudaCheck(cudaGetLastError());
}

// One configuration's kernel; a DM beyond p.dms (a tile past the last) is skipped by the kernel.
template <int BX, int BY, int TX, int TY, int SX, int SY>
inline cudaError_t dedisp_launch(const DedispProblem& p, const uint8_t* in, const float* delay, float* out,
                                 cudaStream_t stream = 0) {
    dim3 grid(CEIL_DIV(p.samples, BX * TX), CEIL_DIV(p.dms, BY * TY));
    dedisp_kernel<BX, BY, TX, TY, SX, SY><<<grid, dim3(BX, BY), 0, stream>>>(p, in, delay, out);
    return cudaGetLastError();
}

// The configuration conf.cuh (or the defaults) names.
#define DEDISP_CONFIG DEDISP_BLOCK_X, DEDISP_BLOCK_Y, DEDISP_TILE_X, DEDISP_TILE_Y, DEDISP_STRIDE_X, DEDISP_STRIDE_Y
#define DEDISP_THREADS (DEDISP_BLOCK_X * DEDISP_BLOCK_Y)
static_assert(DedispConfigCheck<DEDISP_CONFIG>::ok, "");

inline bool dedisp(const DedispProblem& p, const uint8_t* in, const float* delay, float* out, cudaStream_t stream = 0) {
    return cudaCheck((dedisp_launch<DEDISP_CONFIG>(p, in, delay, out, stream)));
}
