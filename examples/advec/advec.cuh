// advec.cuh: the advection tendency of the wind's x component in a large-eddy
// simulation (second-order flux form on a staggered grid, as MicroHH computes
// it; the advec_u kernel of the auto-tuning community's microhh space), in
// double precision.
//
// On a grid of itot x jtot x ktot cells with one ghost cell on each side, the
// velocities u, v, w sit on the cells' faces. The tendency of u at a cell is
// minus the divergence of u's fluxes through the faces of u's own cell:
//
//   ut = - (u_e u_e - u_w u_w) dxi - (v_n u_n - v_s u_s) dyi
//        - (rhoh_t w_t u_t - rhoh_b w_b u_b) dzi[k] / rho[k]
//
// each face value the mean of its two neighbours (advec_u_cell below), with
// reference densities rho (cell centres) and rhoh (levels) and a grid spacing
// that may vary with height (dzi).
//
// Versions:
//   1. advec_reference_kernel: one thread per cell: what the tuned kernel is
//      checked against (and itself checked against the CPU on a small grid by
//      advec.cu).
//   2. advec_kernel<BX, BY, BZ, TX, TY, TZ, ST, MB>: blocks of BX x BY x BZ
//      threads, each thread computing TX x TY x TZ cells: next to each other
//      (ST=0) or a block's extent apart (ST=1) in every direction. MB is the
//      least number of blocks an SM must hold (__launch_bounds__), which caps
//      the registers a thread may have.
//
// Why the space is shaped so: the kernel reads 27 neighbours of u, v and w per
// cell and is bound by memory traffic; a thread's tile reuses its neighbours in
// registers and the cache, but adjacent cells per thread (ST=0) break the
// coalescing along x that the strided layout (ST=1) keeps; a wide block in x
// reads whole cache lines, a deep one in y and z reuses them; MB trades
// registers (the tile's reuse) against blocks in flight.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path, through -I$(CONF_DIR)) may set; AdvecConfigCheck's
// static_asserts say what is legal, so an illegal combination fails to compile
// with a message that names the rule, and a sweep records it as skipped.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#ifndef ADVEC_BLOCK_X
#define ADVEC_BLOCK_X 32       // threads per block in x
#endif
#ifndef ADVEC_BLOCK_Y
#define ADVEC_BLOCK_Y 4        // threads per block in y
#endif
#ifndef ADVEC_BLOCK_Z
#define ADVEC_BLOCK_Z 1        // threads per block in z
#endif
#ifndef ADVEC_TILE_X
#define ADVEC_TILE_X 1         // cells per thread in x
#endif
#ifndef ADVEC_TILE_Y
#define ADVEC_TILE_Y 1         // cells per thread in y
#endif
#ifndef ADVEC_TILE_Z
#define ADVEC_TILE_Z 1         // cells per thread in z
#endif
#ifndef ADVEC_STRIDED
#define ADVEC_STRIDED 1        // 1: a thread's cells a block's extent apart; 0: next to each other
#endif
#ifndef ADVEC_MIN_BLOCKS
#define ADVEC_MIN_BLOCKS 1     // blocks an SM must be able to hold (__launch_bounds__)
#endif

constexpr int ADVEC_SM_THREADS = 2048;   // threads an SM holds at most (every GPU since sm_75 but Turing's 1,024)

// The rules of a legal configuration, one compile-time check per rule; the
// message names the macros, so a sweep's "skipped" says which rule.
template <int BX, int BY, int BZ, int TX, int TY, int TZ, int ST, int MB>
struct AdvecConfigCheck {
    static_assert(BX * BY * BZ >= 32 && BX * BY * BZ <= 1024,
                  "ADVEC_BLOCK_X * ADVEC_BLOCK_Y * ADVEC_BLOCK_Z must be 32..1024 (at least a warp, at most a block)");
    static_assert(TX >= 1 && TX <= 8 && TY >= 1 && TY <= 8 && TZ >= 1 && TZ <= 8,
                  "ADVEC_TILE_X, ADVEC_TILE_Y and ADVEC_TILE_Z must be 1..8");
    static_assert(ST == 0 || ST == 1, "ADVEC_STRIDED must be 0 or 1");
    static_assert(MB >= 1 && BX * BY * BZ * MB <= ADVEC_SM_THREADS,
                  "ADVEC_BLOCK_X * ADVEC_BLOCK_Y * ADVEC_BLOCK_Z * ADVEC_MIN_BLOCKS must be at most 2048 (the "
                  "threads of an SM)");
    static constexpr bool ok = true;
};

// The largest difference the check accepts, relative to 1 + |reference|: both compute the same
// expression per cell, so only its contraction into fused multiply-adds may differ (about 1e-15).
constexpr double ADVEC_TOLERANCE = 1e-12;

struct AdvecProblem {
    int itot = 512, jtot = 512, ktot = 64;   // interior cells; one ghost cell each side
    __host__ __device__ int icells() const { return itot + 2; }
    __host__ __device__ int jcells() const { return jtot + 2; }
    __host__ __device__ int kcells() const { return ktot + 2; }
    size_t cells() const { return size_t(icells()) * jcells() * kcells(); }
};

// The fields a tendency reads: three velocities of cells() values, and per level (kcells()) the
// reference densities at the centres and at the levels below them, and 1 / dz.
struct AdvecFields {
    const double *u, *v, *w, *rho, *rhoh, *dzi;
    double dxi, dyi;
};

__host__ __device__ __forceinline__ double advec_interp(double a, double b) { return 0.5 * (a + b); }

// u's tendency at cell ijk (level k), with jj and kk the strides of y and z: the same
// expression, in the same order, in every kernel and on the CPU.
__host__ __device__ __forceinline__ double advec_u_cell(const AdvecFields& f, size_t ijk, int k, size_t jj, size_t kk) {
    const double* u = f.u;
    return -(advec_interp(u[ijk], u[ijk + 1]) * advec_interp(u[ijk], u[ijk + 1]) -
             advec_interp(u[ijk - 1], u[ijk]) * advec_interp(u[ijk - 1], u[ijk])) * f.dxi -
           (advec_interp(f.v[ijk - 1 + jj], f.v[ijk + jj]) * advec_interp(u[ijk], u[ijk + jj]) -
            advec_interp(f.v[ijk - 1], f.v[ijk]) * advec_interp(u[ijk - jj], u[ijk])) * f.dyi -
           (f.rhoh[k + 1] * advec_interp(f.w[ijk - 1 + kk], f.w[ijk + kk]) * advec_interp(u[ijk], u[ijk + kk]) -
            f.rhoh[k] * advec_interp(f.w[ijk - 1], f.w[ijk]) * advec_interp(u[ijk - kk], u[ijk])) /
               f.rho[k] * f.dzi[k];
}

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

static __global__ void advec_reference_kernel(double* ut, AdvecFields f, AdvecProblem p) {
    const int i = 1 + blockIdx.x * blockDim.x + threadIdx.x, j = 1 + blockIdx.y * blockDim.y + threadIdx.y,
              k = 1 + blockIdx.z;
    if (i > p.itot || j > p.jtot) return;
    const size_t jj = p.icells(), kk = jj * p.jcells(), ijk = i + j * jj + k * kk;
    ut[ijk] = advec_u_cell(f, ijk, k, jj, kk);
}

template <int BX, int BY, int BZ, int TX, int TY, int TZ, int ST, int MB>
__global__ void __launch_bounds__(BX * BY * BZ, MB) advec_kernel(double* __restrict__ ut, AdvecFields f, AdvecProblem p) {
    static_assert(AdvecConfigCheck<BX, BY, BZ, TX, TY, TZ, ST, MB>::ok, "");
    const size_t jj = p.icells(), kk = jj * p.jcells();
    // A thread's first cell, and the step between its cells, in each direction.
    const int i0 = 1 + blockIdx.x * BX * TX + (ST ? threadIdx.x : threadIdx.x * TX);
    const int j0 = 1 + blockIdx.y * BY * TY + (ST ? threadIdx.y : threadIdx.y * TY);
    const int k0 = 1 + blockIdx.z * BZ * TZ + (ST ? threadIdx.z : threadIdx.z * TZ);
    constexpr int SX = ST ? BX : 1, SY = ST ? BY : 1, SZ = ST ? BZ : 1;
#pragma unroll
    for (int tk = 0; tk < TZ; ++tk) {
        const int k = k0 + tk * SZ;
#pragma unroll
        for (int tj = 0; tj < TY; ++tj) {
            const int j = j0 + tj * SY;
#pragma unroll
            for (int ti = 0; ti < TX; ++ti) {
                const int i = i0 + ti * SX;
                if (i <= p.itot && j <= p.jtot && k <= p.ktot) {
                    const size_t ijk = i + j * jj + k * kk;
                    ut[ijk] = advec_u_cell(f, ijk, k, jj, kk);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Launchers: they own the grid arithmetic and check the launch at once.
// ---------------------------------------------------------------------------

inline bool advec_reference(const AdvecProblem& p, const AdvecFields& f, double* ut) {
    advec_reference_kernel<<<dim3(CEIL_DIV(p.itot, 64), CEIL_DIV(p.jtot, 4), p.ktot), dim3(64, 4)>>>(ut, f, p);
    return cudaCheck(cudaGetLastError());
}

template <int BX, int BY, int BZ, int TX, int TY, int TZ>
inline dim3 advec_grid(const AdvecProblem& p) {
    return dim3(CEIL_DIV(p.itot, BX * TX), CEIL_DIV(p.jtot, BY * TY), CEIL_DIV(p.ktot, BZ * TZ));
}

template <int BX, int BY, int BZ, int TX, int TY, int TZ, int ST, int MB>
inline cudaError_t advec_launch(const AdvecProblem& p, const AdvecFields& f, double* ut) {
    advec_kernel<BX, BY, BZ, TX, TY, TZ, ST, MB><<<advec_grid<BX, BY, BZ, TX, TY, TZ>(p), dim3(BX, BY, BZ)>>>(ut, f, p);
    return cudaGetLastError();
}

// The configuration conf.cuh (or the defaults) names.
#define ADVEC_CONFIG ADVEC_BLOCK_X, ADVEC_BLOCK_Y, ADVEC_BLOCK_Z, ADVEC_TILE_X, ADVEC_TILE_Y, ADVEC_TILE_Z, \
                     ADVEC_STRIDED, ADVEC_MIN_BLOCKS
static_assert(AdvecConfigCheck<ADVEC_CONFIG>::ok, "");

inline bool advec(const AdvecProblem& p, const AdvecFields& f, double* ut) {
    return cudaCheck((advec_launch<ADVEC_CONFIG>(p, f, ut)));
}
