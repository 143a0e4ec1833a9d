// expdist: checks expdist_kernel (the configuration conf.cuh names) against the
// reference, then times it at one problem size.
//
//   expdist [--size M,N] [--iters N] [--warmup W] [--nvtx] [--check-only] [--json FILE]
//
// --size M,N     points in the two clouds (default 16384,16384; each 1..16384)
// --iters N      timed launches
// --warmup W     untimed launches first (outside any NVTX range)
// --nvtx         wrap each timed launch in an NVTX range named "iteration"
// --check-only   exit after the correctness check (0: right, 1: wrong)
// --json FILE    write the event timing of every launch as engine-timing/1 JSON
//                (what the sweep's events backend reads)
//
// The check runs first, every time, at the timed size: a sweep's
// `verify: profile` needs no separate check run (exit 1 before any timing).
#include "expdist.cuh"
#include "inputs.cuh"
#include "run_options.cuh"
#include "timed_run.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Options : RunOptions {
    ExpdistProblem p;
};

// Beyond 16,384 x 16,384 one term falls below EXPDIST_TOLERANCE of D and the check could miss it.
bool parse(int argc, char** argv, Options& o) {
    return parse_sized_run(argc, argv, "expdist", "M,N", 16384, o, {&o.p.m, &o.p.n});
}

// Row i of the overlap on the CPU: the reference kernel's row, term for term, in the same order.
double host_row(const ExpdistHostCloud& a, const ExpdistHostCloud& b, int i) {
    double sum = 0.0;
    for (size_t j = 0; j < b.x.size(); ++j) sum += expdist_term(a.x[i], a.y[i], a.s[i], b.x[j], b.y[j], b.s[j]);
    return sum;
}

// The reference's rows spot-checked against the CPU (17 rows, the last included), then the tuned
// kernel's D against the reference's within EXPDIST_TOLERANCE. Before the launch the partial sums
// and D are NaN, so a block that writes nothing, or a launch that never reaches the end, fails.
bool check(const ExpdistProblem& p, const ExpdistHostCloud& ha, const ExpdistHostCloud& hb, ExpdistCloud a,
           ExpdistCloud b, double* partial, unsigned* finished, double* result) {
    double* dRow;
    std::vector<double> rows;
    long double ref = 0.0L;
    bool failed = cudaCheck(cudaMalloc(&dRow, size_t(p.m) * sizeof(double))) ||
                  expdist_reference_total(p, a, b, dRow, rows, ref);
    cudaFree(dRow);
    if (failed) return false;
    double worst_row = 0.0;
    for (int probe = 0; probe < 17; ++probe) {
        const int i = probe == 16 ? p.m - 1 : int((size_t(probe) * 7919u) % size_t(p.m));
        const double cpu = host_row(ha, hb, i), rel = std::fabs(rows[i] - cpu) / cpu;
        if (!(rel <= 1e-12)) {
            fprintf(stderr, "expdist_reference_kernel is wrong at row %d: %.17g, the CPU says %.17g\n", i, rows[i], cpu);
            return false;
        }
        worst_row = std::fmax(worst_row, rel);
    }
    double d = NAN;
    if (cudaCheck(cudaMemset(partial, 0xff, expdist_max_blocks(p) * sizeof(double))) ||
        cudaCheck(cudaMemset(result, 0xff, sizeof(double))) || cudaCheck(cudaMemset(finished, 0, sizeof(unsigned))) ||
        expdist(p, a, b, partial, finished, result) ||
        cudaCheck(cudaMemcpy(&d, result, sizeof(double), cudaMemcpyDeviceToHost)))
        return false;
    const double rel = std::fabs(double((d - ref) / ref));
    if (!(rel <= EXPDIST_TOLERANCE)) {
        fprintf(stderr, "expdist_kernel is wrong: D = %.17g, the reference says %.17g (relative difference %g)\n", d,
                double(ref), rel);
        return false;
    }
    printf("check: ok (D = %.12g over %d x %d pairs; relative difference %.2g from the reference, its rows %.2g "
           "from the CPU's)\n",
           d, p.m, p.n, rel, worst_row);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("expdist: BLOCK=%dx%d TILE=%dx%d UNROLL_X=%d SHARED=%d COLUMN=%d Y_BLOCKS=%d\n", EXPDIST_BLOCK_X,
           EXPDIST_BLOCK_Y, EXPDIST_TILE_X, EXPDIST_TILE_Y, EXPDIST_UNROLL_X, EXPDIST_SHARED, EXPDIST_COLUMN,
           EXPDIST_Y_BLOCKS);
    const ExpdistProblem& p = o.p;
    const ExpdistHostCloud ha = expdist_cloud_a(p), hb = expdist_cloud_b(p);
    ExpdistDeviceCloud a, b;
    double *dPartial, *dResult;
    unsigned* dFinished;
    if (expdist_upload(ha, a) || expdist_upload(hb, b) ||
        cudaCheck(cudaMalloc(&dPartial, expdist_max_blocks(p) * sizeof(double))) ||
        cudaCheck(cudaMalloc(&dResult, sizeof(double))) || cudaCheck(cudaMalloc(&dFinished, sizeof(unsigned))))
        return 1;
    if (!check(p, ha, hb, a.view, b.view, dPartial, dFinished, dResult)) {
        fprintf(stderr, "expdist: FAILED the check at %d x %d points\n", p.m, p.n);
        return 1;
    }
    if (o.check_only) return 0;

    const dim3 grid = expdist_grid<EXPDIST_BLOCK_X, EXPDIST_BLOCK_Y, EXPDIST_TILE_X, EXPDIST_TILE_Y, EXPDIST_COLUMN,
                                   EXPDIST_Y_BLOCKS>(p);
    double median_ms;
    if (!time_one_kernel(o, "expdist", "expdist_kernel", grid, dim3(EXPDIST_BLOCK_X, EXPDIST_BLOCK_Y),
                         [&] { return expdist(p, a.view, b.view, dPartial, dFinished, dResult); }, median_ms))
        return 1;
    // Pair terms per second: the work every configuration does alike.
    double pairs = double(p.m) * p.n;
    printf("size=%dx%d: median %.4f ms, %.1f G pairs/s over %d launches\n", p.m, p.n, median_ms,
           pairs / (median_ms * 1e6), o.iters);
    cudaFree(a.data);
    cudaFree(b.data);
    cudaFree(dPartial);
    cudaFree(dResult);
    cudaFree(dFinished);
    return 0;
}
