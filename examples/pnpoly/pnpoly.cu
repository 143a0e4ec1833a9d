// pnpoly: checks pnpoly_kernel (the configuration conf.cuh names) against the
// reference, then times it at one problem size.
//
//   pnpoly [--points N] [--iters N] [--warmup W] [--nvtx] [--check-only] [--json FILE]
//
// --points N     points to classify (default 4194304), against one polygon of 600 vertices
// --iters N      timed launches
// --warmup W     untimed launches first (outside any NVTX range)
// --nvtx         wrap each timed launch in an NVTX range named "iteration"
// --check-only   exit after the correctness check (0: right, 1: wrong)
// --json FILE    write the event timing of every launch as engine-timing/1 JSON
//                (what the sweep's events backend reads)
//
// The check runs first, every time, at the timed size: a sweep's
// `verify: profile` needs no separate check run (exit 1 before any timing).
#include "inputs.cuh"
#include "pnpoly.cuh"
#include "run_options.cuh"
#include "timed_run.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Options : RunOptions {
    PnpolyProblem p;
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool has_value = i + 1 < argc;
        if (take_run_option(argc, argv, i, o)) continue;
        if (a == "--points" && has_value) o.p.points = atoi(argv[++i]);
        else {
            fprintf(stderr, "pnpoly: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    if (o.p.points < 1 || o.p.points > (1 << 28) || o.iters < 1 || o.warmup < 0) {
        fprintf(stderr, "pnpoly: need --points 1..268435456, --iters >= 1, --warmup >= 0\n");
        return false;
    }
    return true;
}

// The crossing test in double precision on the CPU, for the reference's spot check.
int host_inside(const PnpolyPolygon& poly, float2 q) {
    int c = 0;
    for (int j = 0, k = PNPOLY_VERTICES - 1; j < PNPOLY_VERTICES; k = j++) {
        double xj = poly.v[j].x, yj = poly.v[j].y, xk = poly.v[k].x, yk = poly.v[k].y;
        if ((yj > q.y) != (yk > q.y) && q.x < xj + (xk - xj) / (yk - yj) * (q.y - yj)) c ^= 1;
    }
    return c;
}

// Every point's answer against the reference kernel's, except the few the
// reference flags as too close to an edge for float to decide; the reference
// is spot-checked on the CPU, so a bug the two kernels share is caught too.
// The output starts as -1 (all bytes 0xff), so a point never written fails.
bool check(const PnpolyPolygon& poly, const PnpolyProblem& p, const float2* dPoints, int* dOut, int* dRef, int* dAmb,
           const std::vector<float2>& points) {
    size_t n = size_t(p.points);
    if (cudaCheck(cudaMemset(dOut, 0xff, n * 4)) || pnpoly(poly, p, dPoints, dOut) ||
        pnpoly_reference(poly, p, dPoints, dRef, dAmb, PNPOLY_MARGIN))
        return false;
    std::vector<int> out(n), ref(n), amb(n);
    if (cudaCheck(cudaMemcpy(out.data(), dOut, n * 4, cudaMemcpyDeviceToHost)) ||
        cudaCheck(cudaMemcpy(ref.data(), dRef, n * 4, cudaMemcpyDeviceToHost)) ||
        cudaCheck(cudaMemcpy(amb.data(), dAmb, n * 4, cudaMemcpyDeviceToHost)))
        return false;
    for (int probe = 0; probe < 64; ++probe) {
        size_t i = probe == 63 ? n - 1 : (size_t(probe) * 7919u) % n;
        if (!amb[i] && ref[i] != host_inside(poly, points[i])) {
            fprintf(stderr, "pnpoly_reference_kernel is wrong at point %zu (%g, %g): %d, the CPU says %d\n", i,
                    points[i].x, points[i].y, ref[i], 1 - ref[i]);
            return false;
        }
    }
    size_t unsure = 0, in = 0;
    for (size_t i = 0; i < n; ++i) {
        unsure += amb[i];
        in += ref[i];
        if (out[i] != ref[i] && !(amb[i] && (out[i] == 0 || out[i] == 1))) {
            fprintf(stderr, "pnpoly_kernel is wrong at point %zu (%g, %g): %d, the reference says %d\n", i,
                    points[i].x, points[i].y, out[i], ref[i]);
            return false;
        }
    }
    printf("check: ok (%zu of %zu points inside; %zu too close to an edge to compare)\n", in, n, unsure);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("pnpoly: BLOCK_X=%d TILE=%d BETWEEN=%d SLOPES=%d METHOD=%d\n", PNPOLY_BLOCK_X, PNPOLY_TILE, PNPOLY_BETWEEN,
           PNPOLY_SLOPES, PNPOLY_METHOD);
    const PnpolyProblem& p = o.p;
    const PnpolyPolygon poly = pnpoly_polygon();
    std::vector<float2> points = pnpoly_points(p);
    size_t n = size_t(p.points);
    float2* dPoints;
    int *dOut, *dRef, *dAmb;
    if (cudaCheck(cudaMalloc(&dPoints, n * sizeof(float2))) || cudaCheck(cudaMalloc(&dOut, n * 4)) ||
        cudaCheck(cudaMalloc(&dRef, n * 4)) || cudaCheck(cudaMalloc(&dAmb, n * 4)) ||
        cudaCheck(cudaMemcpy(dPoints, points.data(), n * sizeof(float2), cudaMemcpyHostToDevice)))
        return 1;
    if (!check(poly, p, dPoints, dOut, dRef, dAmb, points)) {
        fprintf(stderr, "pnpoly: FAILED the check at %d points\n", p.points);
        return 1;
    }
    if (o.check_only) return 0;

    double median_ms;
    if (!time_one_kernel(o, "pnpoly", "pnpoly_kernel", dim3(CEIL_DIV(p.points, PNPOLY_BLOCK_X * PNPOLY_TILE)),
                         dim3(PNPOLY_BLOCK_X), [&] { return pnpoly(poly, p, dPoints, dOut); }, median_ms))
        return 1;
    // Point-edge tests per second: the work every configuration does alike.
    double tests = double(p.points) * PNPOLY_VERTICES;
    printf("points=%d vertices=%d: median %.4f ms, %.1f G point-edge tests/s over %d launches\n", p.points,
           PNPOLY_VERTICES, median_ms, tests / (median_ms * 1e6), o.iters);
    cudaFree(dPoints);
    cudaFree(dOut);
    cudaFree(dRef);
    cudaFree(dAmb);
    return 0;
}
