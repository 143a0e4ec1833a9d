// hotspot.cuh: a chip's temperature under its power map, stepped in time (the
// thermal simulation of the Rodinia suite), with temporal tiling: the kernel of
// the auto-tuning community's hotspot space.
//
// A grid of cells holds temperatures T and a fixed power map P. One step:
//
//     T' = T + cap * (P + (T_north + T_south - 2T) * ry + (T_east + T_west - 2T) * rx + (amb - T) * rz)
//
// where a neighbour off the grid is the cell itself (the chip's edges lose no
// heat sideways). A run advances HOTSPOT_STEPS steps.
//
// Versions:
//   1. hotspot_reference_kernel: one thread per cell, one step per launch, from
//      global memory: what the tuned kernel is checked against (and itself
//      checked against the CPU on a small grid by hotspot.cu).
//   2. hotspot_kernel<BX, BY, TX, TY, TT, U, SH>: blocks of BX x BY threads, each
//      block owning an output tile of (BX*TX) x (BY*TY) cells, advanced TT steps
//      per launch (temporal tiling): the block loads its tile and a halo of TT
//      cells on each side into shared memory, steps the whole extended tile TT
//      times there (the region it can still get right shrinks by one cell a
//      side each step), and writes back the tile alone. U unrolls the loop over
//      the TT steps; SH keeps the power map in shared memory too (1) or reads it
//      from global memory at each step (0).
//
// Why the space is shaped so: a launch reads and writes every cell once, so TT
// steps per launch divide the global traffic by TT, but each step recomputes the
// halo (2*TT cells a side), which costs more the smaller the tile; a larger tile
// (block or cells per thread) amortizes the halo but needs shared memory
// ((BX*TX + 2TT) * (BY*TY + 2TT) floats, two or three times over), which bounds
// the blocks per SM, and few large blocks leave SMs idle on a 2048 x 2048 grid.
// The threads stride over the extended tile, so TX and TY set the work per
// thread as well as the tile.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path, through -I$(CONF_DIR)) may set; HotspotConfigCheck's
// static_asserts say what is legal, so an illegal combination fails to compile
// with a message that names the rule, and a sweep records it as skipped.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#ifndef HOTSPOT_BLOCK_X
#define HOTSPOT_BLOCK_X 32     // threads per block in x
#endif
#ifndef HOTSPOT_BLOCK_Y
#define HOTSPOT_BLOCK_Y 8      // threads per block in y
#endif
#ifndef HOTSPOT_TILE_X
#define HOTSPOT_TILE_X 1       // output cells per thread in x
#endif
#ifndef HOTSPOT_TILE_Y
#define HOTSPOT_TILE_Y 1       // output cells per thread in y
#endif
#ifndef HOTSPOT_TEMPORAL
#define HOTSPOT_TEMPORAL 1     // steps per launch (temporal tiling factor)
#endif
#ifndef HOTSPOT_UNROLL
#define HOTSPOT_UNROLL 1       // unroll of the loop over the steps of a launch
#endif
#ifndef HOTSPOT_SH_POWER
#define HOTSPOT_SH_POWER 0     // 1: the power map in shared memory; 0: read from global memory
#endif

constexpr int HOTSPOT_STEPS = 60;               // steps a run advances: a multiple of every TT below
constexpr int HOTSPOT_SHARED_BYTES = 48 * 1024;  // static shared memory a block may have
// The largest difference the check accepts from the reference (temperatures near 330 K): the same
// float expression in the same order, so only its contraction into fused multiply-adds may differ.
constexpr float HOTSPOT_TOLERANCE = 1e-3f;

// The rules of a legal configuration, one compile-time check per rule; the
// message names the macros, so a sweep's "skipped" says which rule.
template <int BX, int BY, int TX, int TY, int TT, int U, int SH>
struct HotspotConfigCheck {
    static_assert(BX * BY >= 32 && BX * BY <= 1024,
                  "HOTSPOT_BLOCK_X * HOTSPOT_BLOCK_Y must be 32..1024 (at least a warp, at most a block)");
    static_assert(TX >= 1 && TX <= 8 && TY >= 1 && TY <= 8, "HOTSPOT_TILE_X and HOTSPOT_TILE_Y must be 1..8");
    static_assert(TT >= 1 && HOTSPOT_STEPS % TT == 0, "HOTSPOT_TEMPORAL must divide HOTSPOT_STEPS (60)");
    static_assert(U >= 1 && TT % U == 0, "HOTSPOT_UNROLL must divide HOTSPOT_TEMPORAL");
    static_assert(SH == 0 || SH == 1, "HOTSPOT_SH_POWER must be 0 or 1");
    static_assert((BX * TX + 2 * TT) * (BY * TY + 2 * TT) * (2 + SH) * 4 <= HOTSPOT_SHARED_BYTES,
                  "(HOTSPOT_BLOCK_X * HOTSPOT_TILE_X + 2 * HOTSPOT_TEMPORAL) * (HOTSPOT_BLOCK_Y * HOTSPOT_TILE_Y + "
                  "2 * HOTSPOT_TEMPORAL) * (2 + HOTSPOT_SH_POWER) floats must fit in 48 KB of shared memory");
    static constexpr bool ok = true;
};

// The step's constants (a stable explicit scheme: cap * (2rx + 2ry + rz) < 1).
struct HotspotCoefficients {
    float cap = 0.5f, rx = 0.2f, ry = 0.2f, rz = 0.02f, amb = 300.0f;
};

struct HotspotProblem {
    int width = 2048, height = 2048;
};

// One step of one cell, from its value, its four neighbours and its power: the
// same expression, in the same order, in every kernel and on the CPU.
__host__ __device__ __forceinline__ float hotspot_step(const HotspotCoefficients& c, float t, float n, float s, float e,
                                                       float w, float p) {
    return t + c.cap * (p + (n + s - 2.0f * t) * c.ry + (e + w - 2.0f * t) * c.rx + (c.amb - t) * c.rz);
}

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

static __global__ void hotspot_reference_kernel(const float* power, const float* t_in, float* t_out, int w, int h,
                                                HotspotCoefficients c) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const int i = y * w + x;
    const float t = t_in[i];
    t_out[i] = hotspot_step(c, t, y > 0 ? t_in[i - w] : t, y < h - 1 ? t_in[i + w] : t, x < w - 1 ? t_in[i + 1] : t,
                            x > 0 ? t_in[i - 1] : t, power[i]);
}

template <int BX, int BY, int TX, int TY, int TT, int U, int SH>
__global__ void __launch_bounds__(BX * BY)
hotspot_kernel(const float* __restrict__ power, const float* __restrict__ t_in, float* __restrict__ t_out, int w,
               int h, HotspotCoefficients c) {
    static_assert(HotspotConfigCheck<BX, BY, TX, TY, TT, U, SH>::ok, "");
    constexpr int OW = BX * TX, OH = BY * TY;          // the block's output tile
    constexpr int EW = OW + 2 * TT, EH = OH + 2 * TT;  // with the halo its TT steps use up
    __shared__ float temp[2][EH][EW];
    __shared__ float pow_sh[SH ? EH : 1][SH ? EW : 1];
    const int x0 = blockIdx.x * OW - TT, y0 = blockIdx.y * OH - TT;   // the extended tile's corner on the grid
    // Cells off the grid load their nearest cell's values; no cell on the grid reads them (its
    // neighbour off the grid is itself), so they only keep the loads in bounds.
    for (int y = threadIdx.y; y < EH; y += BY) {
        const int gy = min(max(y0 + y, 0), h - 1);
        for (int x = threadIdx.x; x < EW; x += BX) {
            const int gx = min(max(x0 + x, 0), w - 1);
            temp[0][y][x] = t_in[gy * w + gx];
            if constexpr (SH) pow_sh[y][x] = power[gy * w + gx];
        }
    }
    __syncthreads();
#pragma unroll U
    for (int s = 0; s < TT; ++s) {
        const float(*src)[EW] = temp[s & 1];
        float(*dst)[EW] = temp[(s + 1) & 1];
        // step s gets right the cells more than s from the extended tile's edge: their neighbours hold step s
        for (int y = s + 1 + threadIdx.y; y < EH - s - 1; y += BY) {
            const int gy = y0 + y;
            for (int x = s + 1 + threadIdx.x; x < EW - s - 1; x += BX) {
                const int gx = x0 + x;
                const float t = src[y][x];
                float p;
                if constexpr (SH) p = pow_sh[y][x];
                else p = power[min(max(gy, 0), h - 1) * w + min(max(gx, 0), w - 1)];
                dst[y][x] = hotspot_step(c, t, gy > 0 ? src[y - 1][x] : t, gy < h - 1 ? src[y + 1][x] : t,
                                         gx < w - 1 ? src[y][x + 1] : t, gx > 0 ? src[y][x - 1] : t, p);
            }
        }
        __syncthreads();
    }
    for (int y = TT + threadIdx.y; y < TT + OH; y += BY) {
        const int gy = y0 + y;
        for (int x = TT + threadIdx.x; x < TT + OW; x += BX) {
            const int gx = x0 + x;
            if (gx < w && gy < h) t_out[gy * w + gx] = temp[TT & 1][y][x];
        }
    }
}

// ---------------------------------------------------------------------------
// Launchers: they own the grid arithmetic and check the launch at once. A run
// is HOTSPOT_STEPS steps from buffer a, ping-ponging between a and b; it ends in
// a when it took an even number of launches (hotspot_result says which).
// ---------------------------------------------------------------------------

inline bool hotspot_reference(const HotspotProblem& p, const HotspotCoefficients& c, const float* power, float* a,
                              float* b, int steps = HOTSPOT_STEPS) {
    dim3 block(32, 8), grid(CEIL_DIV(p.width, 32), CEIL_DIV(p.height, 8));
    for (int s = 0; s < steps; ++s) {
        hotspot_reference_kernel<<<grid, block>>>(power, s % 2 ? b : a, s % 2 ? a : b, p.width, p.height, c);
        if (cudaCheck(cudaGetLastError())) return true;
    }
    return false;
}

template <int BX, int BY, int TX, int TY, int TT, int U, int SH>
inline cudaError_t hotspot_launch(const HotspotProblem& p, const HotspotCoefficients& c, const float* power, float* a,
                                  float* b) {
    dim3 block(BX, BY), grid(CEIL_DIV(p.width, BX * TX), CEIL_DIV(p.height, BY * TY));
    for (int l = 0; l < HOTSPOT_STEPS / TT; ++l) {
        hotspot_kernel<BX, BY, TX, TY, TT, U, SH><<<grid, block>>>(power, l % 2 ? b : a, l % 2 ? a : b, p.width,
                                                                   p.height, c);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

// Where a run of `launches` launches leaves its result: a after an even number, b after an odd one.
inline const float* hotspot_result(int launches, const float* a, const float* b) { return launches % 2 ? b : a; }

// The configuration conf.cuh (or the defaults) names.
#define HOTSPOT_CONFIG HOTSPOT_BLOCK_X, HOTSPOT_BLOCK_Y, HOTSPOT_TILE_X, HOTSPOT_TILE_Y, HOTSPOT_TEMPORAL, \
                       HOTSPOT_UNROLL, HOTSPOT_SH_POWER
static_assert(HotspotConfigCheck<HOTSPOT_CONFIG>::ok, "");

inline bool hotspot(const HotspotProblem& p, const HotspotCoefficients& c, const float* power, float* a, float* b) {
    return cudaCheck((hotspot_launch<HOTSPOT_CONFIG>(p, c, power, a, b)));
}
