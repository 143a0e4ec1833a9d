// pnpoly.cuh: point-in-polygon by crossing number, the kernel of the
// auto-tuning community's pnpoly space (a GIS workload: which of millions of
// points lie inside one polygon of hundreds of vertices).
//
// A horizontal ray from the point crosses the polygon's boundary an odd number
// of times exactly when the point is inside. Per point and edge (vj, vk):
//
//     crosses = the point's y lies between vj.y and vk.y
//               and the point lies left of the edge at that y,
//     left    = p.x < vj.x + slope * (p.y - vj.y),  slope = (vk.x - vj.x) / (vk.y - vj.y)
//
// and the point is inside when the count of crossings is odd. Every point
// reads every edge, so the kernel is compute bound: the work per edge and how
// it is written decide the time, which is what the knobs below change.
//
// Versions:
//   1. pnpoly_reference_kernel: one thread per point, in double precision, and
//      a flag for each point whose answer a float computation may get either way
//      (within a small margin of an edge or of a vertex's height): the check
//      leaves those out.
//   2. pnpoly_kernel<B, T, BETWEEN, SLOPES, METHOD>: blocks of B threads; each
//      thread holds T points in registers, B apart (a warp's loads and stores
//      stay coalesced), so each edge read from the polygon serves T points.
//      BETWEEN picks one of four ways to write "y between the ends"; SLOPES says
//      whether each edge's slope comes precomputed with the polygon (1) or is
//      divided out per edge (0); METHOD how a crossing updates the answer: a
//      branch that flips it (0), an exclusive or with the test (1), or a count
//      whose parity is taken at the end (2).
//
// Why the space is shaped so: the four BETWEEN forms compile to compares,
// branches, a product or min/max, with different instruction counts and
// divergence; a precomputed slope trades a division (tens of instructions) for
// one more load per edge; a tile amortizes the edge's loads and the division
// over T points but costs registers, and with them occupancy, and with a large
// block leaves few blocks for the GPU's SMs.
//
// The polygon is a kernel parameter (__grid_constant__, read through the
// constant cache like __constant__ memory, every thread of a warp reading the
// same edge), so any number of translation units can launch the kernel with no
// symbol of their own to fill.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path, through -I$(CONF_DIR)) may set; PnpolyConfigCheck's
// static_asserts say what is legal, so an illegal combination fails to compile
// with a message that names the rule, and a sweep records it as skipped.
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#ifndef PNPOLY_BLOCK_X
#define PNPOLY_BLOCK_X 256    // threads per block
#endif
#ifndef PNPOLY_TILE
#define PNPOLY_TILE 1         // points per thread
#endif
#ifndef PNPOLY_BETWEEN
#define PNPOLY_BETWEEN 0      // how "y between the edge's ends" is written: 0-3 (pnpoly_between)
#endif
#ifndef PNPOLY_SLOPES
#define PNPOLY_SLOPES 0       // 1: slopes precomputed with the polygon; 0: divided per edge
#endif
#ifndef PNPOLY_METHOD
#define PNPOLY_METHOD 0       // a crossing: 0 flips by a branch, 1 xor, 2 counts (parity at the end)
#endif

constexpr int PNPOLY_VERTICES = 600;

// The rules of a legal configuration, one compile-time check per rule; the
// message names the macros, so a sweep's "skipped" says which rule.
template <int B, int T, int BETWEEN, int SLOPES, int METHOD>
struct PnpolyConfigCheck {
    static_assert(B >= 32 && B <= 1024 && B % 32 == 0, "PNPOLY_BLOCK_X must be a multiple of 32 in 32..1024 (whole warps)");
    static_assert(T >= 1 && T <= 32, "PNPOLY_TILE must be 1..32 (points held in registers)");
    static_assert(BETWEEN >= 0 && BETWEEN <= 3, "PNPOLY_BETWEEN must be 0, 1, 2 or 3");
    static_assert(SLOPES == 0 || SLOPES == 1, "PNPOLY_SLOPES must be 0 or 1");
    static_assert(METHOD >= 0 && METHOD <= 2, "PNPOLY_METHOD must be 0, 1 or 2");
    static constexpr bool ok = true;
};

// The polygon as the kernels take it: vertices in order (the last edge closes
// it) and each edge's slope dx/dy, edge j running from vertex j to vertex j-1.
struct PnpolyPolygon {
    float2 v[PNPOLY_VERTICES];
    float slope[PNPOLY_VERTICES];
};

struct PnpolyProblem {
    int points = 1 << 22;
};

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

// inside[i] = 1 when point i is inside, in double precision; ambiguous[i] = 1
// when a float computation may decide it either way: its y exactly a vertex's
// (where the four forms of pnpoly_between differ: they compare the same floats
// and agree everywhere else; a product of two differences cannot underflow for
// heights in [0, 1]), or its x within `margin` (scaled by the edge's slope) of
// an edge it crosses, where float rounding of the crossing's x can tip it.
static __global__ void pnpoly_reference_kernel(const __grid_constant__ PnpolyPolygon poly, const float2* points,
                                               int* inside, int* ambiguous, int n, double margin) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double px = points[i].x, py = points[i].y;
    int c = 0, unsure = 0;
    for (int j = 0, k = PNPOLY_VERTICES - 1; j < PNPOLY_VERTICES; k = j++) {
        const double xj = poly.v[j].x, yj = poly.v[j].y, xk = poly.v[k].x, yk = poly.v[k].y;
        if (py == yj) unsure = 1;
        if ((yj > py) != (yk > py)) {
            const double slope = (xk - xj) / (yk - yj), x = xj + slope * (py - yj);
            if (fabs(px - x) < margin * fmax(1.0, fabs(slope))) unsure = 1;
            if (px < x) c ^= 1;
        }
    }
    inside[i] = c;
    ambiguous[i] = unsure;
}

// Whether y lies between the ends' heights a and b (one end counted, the other
// not): four ways to write it that agree away from a vertex's height.
template <int BETWEEN>
__device__ __forceinline__ bool pnpoly_between(float y, float a, float b) {
    if constexpr (BETWEEN == 0) return (a > y) != (b > y);                     // two compares, one xor
    else if constexpr (BETWEEN == 1) return (y < a && y >= b) || (y < b && y >= a);   // short-circuit branches
    else if constexpr (BETWEEN == 2) return (y - a) * (y - b) < 0.0f;          // the sign of a product
    else return fminf(a, b) <= y && y < fmaxf(a, b);                          // min and max
}

template <int B, int T, int BETWEEN, int SLOPES, int METHOD>
__global__ void __launch_bounds__(B)
pnpoly_kernel(const __grid_constant__ PnpolyPolygon poly, const float2* __restrict__ points, int* __restrict__ inside,
              int n) {
    static_assert(PnpolyConfigCheck<B, T, BETWEEN, SLOPES, METHOD>::ok, "");
    // The block's points are B * T consecutive ones; thread x holds first + t*B.
    const int first = blockIdx.x * B * T + threadIdx.x;
    float2 p[T];
    int c[T];
#pragma unroll
    for (int t = 0; t < T; ++t) {
        const int i = first + t * B;
        p[t] = i < n ? points[i] : make_float2(0.0f, 0.0f);
        c[t] = 0;
    }
    for (int j = 0, k = PNPOLY_VERTICES - 1; j < PNPOLY_VERTICES; k = j++) {
        const float2 vj = poly.v[j], vk = poly.v[k];
        const float slope = SLOPES ? poly.slope[j] : (vk.x - vj.x) / (vk.y - vj.y);
#pragma unroll
        for (int t = 0; t < T; ++t) {
            const bool crosses = pnpoly_between<BETWEEN>(p[t].y, vj.y, vk.y) && p[t].x < vj.x + slope * (p[t].y - vj.y);
            if constexpr (METHOD == 0) {
                if (crosses) c[t] = !c[t];
            } else if constexpr (METHOD == 1) {
                c[t] ^= int(crosses);
            } else {
                c[t] += int(crosses);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < T; ++t) {
        const int i = first + t * B;
        if (i < n) inside[i] = c[t] & 1;
    }
}

// ---------------------------------------------------------------------------
// Launchers: they own the grid arithmetic and check the launch at once.
// ---------------------------------------------------------------------------

inline bool pnpoly_reference(const PnpolyPolygon& poly, const PnpolyProblem& p, const float2* points, int* inside,
                             int* ambiguous, double margin, cudaStream_t stream = 0) {
    pnpoly_reference_kernel<<<CEIL_DIV(p.points, 256), 256, 0, stream>>>(poly, points, inside, ambiguous, p.points,
                                                                          margin);
    return cudaCheck(cudaGetLastError());
}

template <int B, int T, int BETWEEN, int SLOPES, int METHOD>
inline cudaError_t pnpoly_launch(const PnpolyPolygon& poly, const PnpolyProblem& p, const float2* points, int* inside,
                                 cudaStream_t stream = 0) {
    pnpoly_kernel<B, T, BETWEEN, SLOPES, METHOD><<<CEIL_DIV(p.points, B * T), B, 0, stream>>>(poly, points, inside,
                                                                                            p.points);
    return cudaGetLastError();
}

// The configuration conf.cuh (or the defaults) names.
#define PNPOLY_CONFIG PNPOLY_BLOCK_X, PNPOLY_TILE, PNPOLY_BETWEEN, PNPOLY_SLOPES, PNPOLY_METHOD
static_assert(PnpolyConfigCheck<PNPOLY_CONFIG>::ok, "");

inline bool pnpoly(const PnpolyPolygon& poly, const PnpolyProblem& p, const float2* points, int* inside,
                   cudaStream_t stream = 0) {
    return cudaCheck((pnpoly_launch<PNPOLY_CONFIG>(poly, p, points, inside, stream)));
}
