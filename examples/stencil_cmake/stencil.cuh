// stencil.cuh: Jacobi sweeps of the 5-point Poisson stencil on an N x N grid, and
// the residual of the result, in fp32 (the residual summed in fp64).
//
// The problem: -laplace(u) = f on the unit square, u fixed on the boundary, f
// given already scaled by h^2. One Jacobi sweep sets every interior point to
//     u'[i][j] = (u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1] + f[i][j]) / 4
// and copies the boundary; the residual is sum over the interior of
//     (f[i][j] + u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1] - 4 u[i][j])^2.
//
// Versions:
//   1. jacobi_kernel<BX, BY, TX, TY, USE_SHARED>: blocks of BX x BY threads, each
//      thread updating TX x TY points, so a block updates a (BY*TY) x (BX*TX)
//      patch. A thread's points are BX columns and BY rows apart (not adjacent),
//      so the threads of a warp always touch consecutive columns (coalesced);
//      more points per thread means fewer blocks and more work per thread to
//      hide latency with, at the cost of registers and parallelism (TX = TY = 1:
//      one thread per point). With USE_SHARED = 1 a block first stages its patch
//      and a one-point halo in shared memory, so each value of u is read from
//      global memory about once per block instead of five times per point; with
//      0 every thread reads its five values from global memory and relies on the
//      caches. Which is faster depends on the patch shape (a wide patch reuses
//      more of each row in L1), hence a swept flag.
//   2. residual_partial_kernel<BLOCK, ITEMS>: a block sums BLOCK * ITEMS interior
//      points; thread t takes points t, t + BLOCK, ... (ITEMS of them, so a warp
//      reads consecutive points), then a shared-memory tree sums the block's
//      BLOCK values (BLOCK a power of two) into one partial sum per block. More
//      ITEMS: fewer blocks and partials, less parallelism.
//   3. residual_sum_kernel<BLOCK>: one block of BLOCK threads sums the partials
//      the same way (a second pass keeps the sum deterministic, no atomics).
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path: -I$(CONF_DIR) in the Makefile, CONF_DIR in CMake) may set;
// the static_asserts say what is legal, so an illegal combination fails to
// compile with a message that names the rule, and a sweep records it as skipped.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#ifndef STENCIL_BLOCK_X
#define STENCIL_BLOCK_X 32      // threads of a Jacobi block along a row (consecutive points)
#endif
#ifndef STENCIL_BLOCK_Y
#define STENCIL_BLOCK_Y 8       // threads of a Jacobi block along a column
#endif
#ifndef STENCIL_RED_BLOCK
#define STENCIL_RED_BLOCK 256   // threads of a residual block (a power of two)
#endif
#ifndef STENCIL_ITEMS
#define STENCIL_ITEMS 4         // points each residual thread sums before the block's tree
#endif
#ifndef STENCIL_TILE_X
#define STENCIL_TILE_X 1        // points each Jacobi thread updates along a row (BLOCK_X columns apart)
#endif
#ifndef STENCIL_TILE_Y
#define STENCIL_TILE_Y 1        // points each Jacobi thread updates along a column (BLOCK_Y rows apart)
#endif
#ifndef STENCIL_USE_SHARED
#define STENCIL_USE_SHARED 1    // 0 or 1: stage the Jacobi block's tile and halo in shared memory
#endif

#define STENCIL_THREADS (STENCIL_BLOCK_X * STENCIL_BLOCK_Y)
// The patch of points a Jacobi block updates: STENCIL_PATCH_Y rows of STENCIL_PATCH_X.
#define STENCIL_PATCH_X (STENCIL_BLOCK_X * STENCIL_TILE_X)
#define STENCIL_PATCH_Y (STENCIL_BLOCK_Y * STENCIL_TILE_Y)
// Static shared memory of the Jacobi kernel: the patch and its halo (none without USE_SHARED).
#define STENCIL_SMEM_BYTES (STENCIL_USE_SHARED * (STENCIL_PATCH_X + 2) * (STENCIL_PATCH_Y + 2) * 4)

static_assert(STENCIL_BLOCK_X >= 1 && STENCIL_BLOCK_Y >= 1, "STENCIL_BLOCK_X and STENCIL_BLOCK_Y must be positive");
static_assert(STENCIL_THREADS % 32 == 0,
              "STENCIL_BLOCK_X*STENCIL_BLOCK_Y threads must be a multiple of 32 (whole warps)");
static_assert(STENCIL_THREADS <= 1024, "STENCIL_BLOCK_X*STENCIL_BLOCK_Y threads must be <= 1024 (a block's limit)");
static_assert(STENCIL_TILE_X >= 1 && STENCIL_TILE_X <= 8 && STENCIL_TILE_Y >= 1 && STENCIL_TILE_Y <= 8,
              "STENCIL_TILE_X and STENCIL_TILE_Y must be 1..8 (points per thread: registers)");
static_assert(STENCIL_SMEM_BYTES <= 48 * 1024,
              "(STENCIL_BLOCK_X*STENCIL_TILE_X+2)*(STENCIL_BLOCK_Y*STENCIL_TILE_Y+2)*4 bytes of shared memory must be "
              "<= 48 KB (the static limit) when STENCIL_USE_SHARED is 1");
static_assert(STENCIL_RED_BLOCK >= 32 && STENCIL_RED_BLOCK <= 1024 &&
                  (STENCIL_RED_BLOCK & (STENCIL_RED_BLOCK - 1)) == 0,
              "STENCIL_RED_BLOCK must be a power of two from 32 to 1024 (the tree halves it)");
static_assert(STENCIL_ITEMS >= 1 && STENCIL_ITEMS <= 64, "STENCIL_ITEMS must be 1..64 (points per residual thread)");
static_assert(STENCIL_USE_SHARED == 0 || STENCIL_USE_SHARED == 1, "STENCIL_USE_SHARED must be 0 or 1");

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

template <int BX, int BY, int TX, int TY, int USE_SHARED>
__global__ void __launch_bounds__(BX * BY)
jacobi_kernel(int n, const float* __restrict__ u, const float* __restrict__ f, float* __restrict__ out) {
    constexpr int PX = BX * TX, PY = BY * TY;   // the block's patch: PY rows of PX points
    // The patch with its halo (one element when unused); points outside the grid
    // are never read (only interior points read neighbours, and theirs are inside).
    __shared__ float tile[USE_SHARED ? PY + 2 : 1][USE_SHARED ? PX + 2 : 1];
    const int i0 = blockIdx.y * PY, j0 = blockIdx.x * PX;
    if constexpr (USE_SHARED) {
        for (int t = threadIdx.y * BX + threadIdx.x; t < (PY + 2) * (PX + 2); t += BX * BY) {
            int ti = t / (PX + 2), tj = t % (PX + 2), gi = i0 - 1 + ti, gj = j0 - 1 + tj;
            tile[ti][tj] = gi >= 0 && gj >= 0 && gi < n && gj < n ? u[(size_t)gi * n + gj] : 0.0f;
        }
        __syncthreads();
    }
#pragma unroll
    for (int ty = 0; ty < TY; ++ty) {
#pragma unroll
        for (int tx = 0; tx < TX; ++tx) {
            const int li = threadIdx.y + ty * BY, lj = threadIdx.x + tx * BX;   // within the patch
            const int i = i0 + li, j = j0 + lj;
            if (i >= n || j >= n) continue;   // after the block's __syncthreads
            const bool interior = i > 0 && j > 0 && i < n - 1 && j < n - 1;
            const size_t at = (size_t)i * n + j;
            if (!interior) {
                out[at] = u[at];
                continue;
            }
            float north, south, west, east;
            if constexpr (USE_SHARED) {
                north = tile[li][lj + 1];
                south = tile[li + 2][lj + 1];
                west = tile[li + 1][lj];
                east = tile[li + 1][lj + 2];
            } else {
                north = u[at - n];
                south = u[at + n];
                west = u[at - 1];
                east = u[at + 1];
            }
            out[at] = 0.25f * (north + south + west + east + f[at]);
        }
    }
}

template <int BLOCK>
__device__ double block_sum(double v) {
    __shared__ double s[BLOCK];
    s[threadIdx.x] = v;
    __syncthreads();
#pragma unroll
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    return s[0];
}

template <int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
residual_partial_kernel(int n, const float* __restrict__ u, const float* __restrict__ f, double* __restrict__ partial) {
    const long long inner = (long long)(n - 2) * (n - 2);
    const long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x;
    double acc = 0.0;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        long long p = base + (long long)k * BLOCK;
        if (p < inner) {
            int i = 1 + int(p / (n - 2)), j = 1 + int(p % (n - 2));
            size_t at = (size_t)i * n + j;
            float r = f[at] + u[at - n] + u[at + n] + u[at - 1] + u[at + 1] - 4.0f * u[at];
            acc += double(r) * r;
        }
    }
    double sum = block_sum<BLOCK>(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) residual_sum_kernel(int count, const double* __restrict__ partial, double* out) {
    double acc = 0.0;
    for (int k = threadIdx.x; k < count; k += BLOCK) acc += partial[k];
    double sum = block_sum<BLOCK>(acc);
    if (threadIdx.x == 0) *out = sum;
}

// ---------------------------------------------------------------------------
// Launchers: they own the grid arithmetic and check the launch at once.
// ---------------------------------------------------------------------------

inline dim3 jacobi_grid(int n) { return dim3(CEIL_DIV(n, STENCIL_PATCH_X), CEIL_DIV(n, STENCIL_PATCH_Y)); }
inline dim3 jacobi_block() { return dim3(STENCIL_BLOCK_X, STENCIL_BLOCK_Y); }

// Partial sums (blocks of the first residual pass) for an n x n grid.
inline int residual_blocks(int n) {
    long long inner = (long long)(n - 2) * (n - 2);
    return int(CEIL_DIV(inner, (long long)STENCIL_RED_BLOCK * STENCIL_ITEMS));
}

inline bool jacobi(int n, const float* u, const float* f, float* out, cudaStream_t stream = 0) {
    jacobi_kernel<STENCIL_BLOCK_X, STENCIL_BLOCK_Y, STENCIL_TILE_X, STENCIL_TILE_Y, STENCIL_USE_SHARED><<<jacobi_grid(n), jacobi_block(), 0, stream>>>(
        n, u, f, out);
    return cudaCheck(cudaGetLastError());
}

inline bool residual_partial(int n, const float* u, const float* f, double* partial, cudaStream_t stream = 0) {
    residual_partial_kernel<STENCIL_RED_BLOCK, STENCIL_ITEMS><<<residual_blocks(n), STENCIL_RED_BLOCK, 0, stream>>>(
        n, u, f, partial);
    return cudaCheck(cudaGetLastError());
}

inline bool residual_sum(int count, const double* partial, double* out, cudaStream_t stream = 0) {
    residual_sum_kernel<STENCIL_RED_BLOCK><<<1, STENCIL_RED_BLOCK, 0, stream>>>(count, partial, out);
    return cudaCheck(cudaGetLastError());
}
