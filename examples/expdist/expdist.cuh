// expdist.cuh: the Gaussian overlap of two point clouds, the cost function that
// registers super-resolution microscopy particles (the expdist kernel of the
// auto-tuning community's benchmark spaces), in double precision.
//
// Two clouds A (m points) and B (n points) in the plane, each point with its
// localisation uncertainty s. The overlap sums every pair:
//
//     D = sum over i < m, j < n of exp(-|A_i - B_j|^2 / (s_i + s_j))
//
// m * n terms of a subtraction, a division and an exponential each, read from
// m + n points: the work is double-precision arithmetic, not memory traffic.
//
// Versions:
//   1. expdist_reference_kernel: one thread per point of A, summing its row of
//      terms over B in order: what the tuned kernel is checked against (its rows
//      are summed on the CPU, and spot-checked against the CPU's own terms by
//      expdist.cu).
//   2. expdist_kernel<BX, BY, TX, TY, UX, SH, COL, YB>: blocks of BX x BY threads;
//      a thread holds TX points of A in registers (BX apart) and, per block row of
//      B, takes TY points of B (BY apart), so a block covers (BX*TX) x (BY*TY)
//      terms a pass. UX unrolls the loop over the thread's A points (below TX the
//      points' registers are indexed at run time: local memory). SH stages the
//      block row's points of B in shared memory (1) or reads them through the
//      cache (0). COL=0 gives every block row of B a block of its own (a grid of
//      m/(BX*TX) x n/(BY*TY) blocks, one pass each); COL=1 launches YB blocks per
//      column, each striding over B by YB block rows. Each block sums its terms
//      (warp shuffles, then one warp) into a partial sum; the last block to finish
//      adds the partials up, in order, into D: one kernel, no second launch.
//
// Why the space is shaped so: a thread's TX x TY terms reuse its TX points of A
// and each point of B TX times, but more registers per thread leave fewer
// threads per SM; small tiles with COL=0 make millions of blocks whose
// reductions and partial sums cost more than their terms; COL=1 trades that for
// too few blocks when YB is small and the tile is large (a 16,384-point cloud
// is only 4 columns of 4,096 points); a partial unroll moves the A points to
// local memory. Which of these binds depends on the GPU's double-precision rate,
// register file and SM count.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path, through -I$(CONF_DIR)) may set; ExpdistConfigCheck's
// static_asserts say what is legal, so an illegal combination fails to compile
// with a message that names the rule, and a sweep records it as skipped.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#include <cmath>

#ifndef EXPDIST_BLOCK_X
#define EXPDIST_BLOCK_X 32     // threads per block in x (over the points of A)
#endif
#ifndef EXPDIST_BLOCK_Y
#define EXPDIST_BLOCK_Y 4      // threads per block in y (over the points of B)
#endif
#ifndef EXPDIST_TILE_X
#define EXPDIST_TILE_X 1       // points of A per thread
#endif
#ifndef EXPDIST_TILE_Y
#define EXPDIST_TILE_Y 1       // points of B per thread and block row
#endif
#ifndef EXPDIST_UNROLL_X
#define EXPDIST_UNROLL_X 1     // unroll of the loop over a thread's points of A
#endif
#ifndef EXPDIST_SHARED
#define EXPDIST_SHARED 0       // 1: a block row of B staged in shared memory; 0: read through the cache
#endif
#ifndef EXPDIST_COLUMN
#define EXPDIST_COLUMN 0       // 1: YB blocks per column striding over B; 0: a block per block row
#endif
#ifndef EXPDIST_Y_BLOCKS
#define EXPDIST_Y_BLOCKS 1     // blocks per column when EXPDIST_COLUMN is 1
#endif

// The largest relative difference the check accepts from the reference. Both sum the same terms
// (the same expression, the same device exp) in another order; their rounding differs by less than
// 2e-11 of D even where a thread sums 131,072 terms, while one term missing or counted twice
// moves D by more than 5e-10 of it with expdist_points' clouds (every term is over 0.13 and D
// under m * n) up to the largest problem the program takes, 16,384 x 16,384.
constexpr double EXPDIST_TOLERANCE = 1e-10;

// The rules of a legal configuration, one compile-time check per rule; the
// message names the macros, so a sweep's "skipped" says which rule.
template <int BX, int BY, int TX, int TY, int UX, int SH, int COL, int YB>
struct ExpdistConfigCheck {
    static_assert(BX * BY >= 32 && BX * BY <= 1024,
                  "EXPDIST_BLOCK_X * EXPDIST_BLOCK_Y must be 32..1024 (at least a warp, at most a block)");
    static_assert(BX % 32 == 0, "EXPDIST_BLOCK_X must be a multiple of 32 (a block's rows are whole warps)");
    static_assert(TX >= 1 && TX <= 8 && TY >= 1 && TY <= 8, "EXPDIST_TILE_X and EXPDIST_TILE_Y must be 1..8");
    static_assert(UX >= 1 && TX % UX == 0, "EXPDIST_UNROLL_X must divide EXPDIST_TILE_X");
    static_assert(SH == 0 || SH == 1, "EXPDIST_SHARED must be 0 or 1");
    static_assert(COL == 0 || COL == 1, "EXPDIST_COLUMN must be 0 or 1");
    static_assert(YB >= 1 && (COL == 1 || YB == 1),
                  "EXPDIST_Y_BLOCKS must be 1 unless EXPDIST_COLUMN is 1 (it sets the blocks per column)");
    static constexpr bool ok = true;
};

struct ExpdistProblem {
    int m = 16384, n = 16384;   // points of A and of B
};

// A cloud as three arrays (coalesced loads along a block's x).
struct ExpdistCloud {
    const double *x, *y, *s;
};

// One term: the same expression, in the same order, in every kernel and on the CPU. A point off
// its cloud is placed at x = +inf (A) or -inf (B), which makes its terms exactly 0 without a branch.
__host__ __device__ __forceinline__ double expdist_term(double ax, double ay, double as, double bx, double by,
                                                        double bs) {
    const double dx = ax - bx, dy = ay - by;
    return exp(-(dx * dx + dy * dy) / (as + bs));
}

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

static __global__ void expdist_reference_kernel(ExpdistCloud a, ExpdistCloud b, int m, int n, double* row) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    double sum = 0.0;
    for (int j = 0; j < n; ++j) sum += expdist_term(a.x[i], a.y[i], a.s[i], b.x[j], b.y[j], b.s[j]);
    row[i] = sum;
}

// The sum of v over a block of NT threads (NT a multiple of 32), in a fixed order; every thread
// gets it. warp_sums: 32 doubles of shared memory, free again when this returns.
template <int NT>
__device__ __forceinline__ double expdist_block_sum(double v, double* warp_sums) {
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, lane = tid & 31, warp = tid >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < NT / 32 ? warp_sums[lane] : 0.0;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) warp_sums[0] = v;
    }
    __syncthreads();
    v = warp_sums[0];
    __syncthreads();
    return v;
}

template <int BX, int BY, int TX, int TY, int UX, int SH, int COL, int YB>
__global__ void __launch_bounds__(BX * BY)
expdist_kernel(ExpdistCloud a, ExpdistCloud b, int m, int n, double* partial, unsigned* finished, double* result) {
    static_assert(ExpdistConfigCheck<BX, BY, TX, TY, UX, SH, COL, YB>::ok, "");
    constexpr int NT = BX * BY, PX = BX * TX, PY = BY * TY;
    __shared__ double warp_sums[32];
    __shared__ double row_b[SH ? 3 : 1][SH ? PY : 1];
    __shared__ bool last;

    double ax[TX], ay[TX], as[TX];
#pragma unroll
    for (int k = 0; k < TX; ++k) {
        const int i = blockIdx.x * PX + threadIdx.x + k * BX;
        ax[k] = i < m ? a.x[i] : INFINITY;
        ay[k] = i < m ? a.y[i] : 0.0;
        as[k] = i < m ? a.s[i] : 1.0;
    }
    double acc = 0.0;
    // COL=0: this block's row of B, once. COL=1: rows blockIdx.y, blockIdx.y + YB, ...
    const int stride = COL ? YB * PY : n;
    for (int row = blockIdx.y * PY; row < n; row += stride) {
        if constexpr (SH) {
            for (int t = threadIdx.y * BX + threadIdx.x; t < PY; t += NT) {
                const int j = row + t;
                row_b[0][t] = j < n ? b.x[j] : -INFINITY;
                row_b[1][t] = j < n ? b.y[j] : 0.0;
                row_b[2][t] = j < n ? b.s[j] : 1.0;
            }
            __syncthreads();
        }
#pragma unroll
        for (int l = 0; l < TY; ++l) {
            const int t = threadIdx.y + l * BY, j = row + t;
            double bx, by, bs;
            if constexpr (SH) {
                bx = row_b[0][t], by = row_b[1][t], bs = row_b[2][t];
            } else {
                bx = j < n ? __ldg(&b.x[j]) : -INFINITY;
                by = j < n ? __ldg(&b.y[j]) : 0.0;
                bs = j < n ? __ldg(&b.s[j]) : 1.0;
            }
#pragma unroll UX
            for (int k = 0; k < TX; ++k) acc += expdist_term(ax[k], ay[k], as[k], bx, by, bs);
        }
        if constexpr (SH) __syncthreads();   // the next row's staging overwrites row_b
    }

    // The block's partial sum; the last block to finish (in the order of their tickets) adds
    // them all, in index order, and leaves the counter at 0 for the next launch.
    const int tid = threadIdx.y * BX + threadIdx.x;
    const unsigned blocks = gridDim.x * gridDim.y, id = blockIdx.y * gridDim.x + blockIdx.x;
    const double block_total = expdist_block_sum<NT>(acc, warp_sums);
    if (tid == 0) {
        partial[id] = block_total;
        __threadfence();
        last = atomicAdd(finished, 1u) == blocks - 1;
    }
    __syncthreads();
    if (!last) return;
    double sum = 0.0;
    for (unsigned k = tid; k < blocks; k += NT) sum += __ldcg(&partial[k]);
    sum = expdist_block_sum<NT>(sum, warp_sums);
    if (tid == 0) {
        *result = sum;
        *finished = 0;
    }
}

// ---------------------------------------------------------------------------
// Launchers: they own the grid arithmetic and check the launch at once.
// ---------------------------------------------------------------------------

template <int BX, int BY, int TX, int TY, int COL, int YB>
inline dim3 expdist_grid(const ExpdistProblem& p) {
    return dim3(CEIL_DIV(p.m, BX * TX), COL ? YB : CEIL_DIV(p.n, BY * TY));
}

// A bound on the blocks any legal configuration launches, for the partial sums' buffer: COL=0
// with a block's x at its least (32 threads, one point each) and a row of B at its least (one point).
inline size_t expdist_max_blocks(const ExpdistProblem& p) {
    return size_t(CEIL_DIV(p.m, 32)) * size_t(p.n);
}

inline bool expdist_reference(const ExpdistProblem& p, ExpdistCloud a, ExpdistCloud b, double* row) {
    expdist_reference_kernel<<<CEIL_DIV(p.m, 128), 128>>>(a, b, p.m, p.n, row);
    return cudaCheck(cudaGetLastError());
}

// `finished` must be 0 before the first launch (each launch leaves it so); D lands in *result.
template <int BX, int BY, int TX, int TY, int UX, int SH, int COL, int YB>
inline cudaError_t expdist_launch(const ExpdistProblem& p, ExpdistCloud a, ExpdistCloud b, double* partial,
                                  unsigned* finished, double* result) {
    const dim3 grid = expdist_grid<BX, BY, TX, TY, COL, YB>(p);
    if (size_t(grid.x) * grid.y > expdist_max_blocks(p)) return cudaErrorInvalidValue;
    expdist_kernel<BX, BY, TX, TY, UX, SH, COL, YB><<<grid, dim3(BX, BY)>>>(a, b, p.m, p.n, partial, finished, result);
    return cudaGetLastError();
}

// The configuration conf.cuh (or the defaults) names.
#define EXPDIST_CONFIG EXPDIST_BLOCK_X, EXPDIST_BLOCK_Y, EXPDIST_TILE_X, EXPDIST_TILE_Y, EXPDIST_UNROLL_X, \
                       EXPDIST_SHARED, EXPDIST_COLUMN, EXPDIST_Y_BLOCKS
static_assert(ExpdistConfigCheck<EXPDIST_CONFIG>::ok, "");

inline bool expdist(const ExpdistProblem& p, ExpdistCloud a, ExpdistCloud b, double* partial, unsigned* finished,
                    double* result) {
    return cudaCheck((expdist_launch<EXPDIST_CONFIG>(p, a, b, partial, finished, result)));
}
