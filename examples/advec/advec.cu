// advec: checks advec_kernel (the configuration conf.cuh names) against the
// reference, then times it at one problem size.
//
//   advec [--size I,J,K] [--iters N] [--warmup W] [--nvtx] [--check-only] [--json FILE]
//
// --size I,J,K   interior cells (default 512,512,64; each 1..1024), one ghost cell each side
// --iters N      timed launches
// --warmup W     untimed launches first (outside any NVTX range)
// --nvtx         wrap each timed launch in an NVTX range named "iteration"
// --check-only   exit after the correctness check (0: right, 1: wrong)
// --json FILE    write the event timing of every launch as engine-timing/1 JSON
//                (what the sweep's events backend reads)
//
// The check runs first, every time, at the timed size: a sweep's
// `verify: profile` needs no separate check run (exit 1 before any timing).
#include "advec.cuh"
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
    AdvecProblem p;
};

bool parse(int argc, char** argv, Options& o) {
    return parse_sized_run(argc, argv, "advec", "I,J,K", 1024, o, {&o.p.itot, &o.p.jtot, &o.p.ktot});
}

// Every interior cell's tendency on the CPU (ghost cells NaN), for checking the reference kernel.
std::vector<double> host_tendency(const AdvecProblem& p, const AdvecHostFields& h) {
    std::vector<double> ut(p.cells(), NAN);
    const AdvecFields f{h.u.data(), h.v.data(), h.w.data(), h.rho.data(), h.rhoh.data(), h.dzi.data(), h.dxi, h.dyi};
    const size_t jj = p.icells(), kk = jj * p.jcells();
    for (int k = 1; k <= p.ktot; ++k)
        for (int j = 1; j <= p.jtot; ++j)
            for (int i = 1; i <= p.itot; ++i) ut[i + j * jj + k * kk] = advec_u_cell(f, i + j * jj + k * kk, k, jj, kk);
    return ut;
}

// Runs `kernel` (the reference or the tuned one) into a NaN-poisoned output and copies it back;
// true on a CUDA error.
template <class Kernel>
bool run_into(const AdvecProblem& p, double* dOut, std::vector<double>& out, Kernel kernel) {
    out.resize(p.cells());
    return cudaCheck(cudaMemset(dOut, 0xff, p.cells() * sizeof(double))) || kernel() ||
           cudaCheck(cudaMemcpy(out.data(), dOut, p.cells() * sizeof(double), cudaMemcpyDeviceToHost));
}

// The first cell where two outputs differ (advec_matches), or -1.
long long first_mismatch(const std::vector<double>& out, const std::vector<double>& ref) {
    for (size_t c = 0; c < out.size(); ++c)
        if (!advec_matches(out[c], ref[c])) return (long long)c;
    return -1;
}

// The reference kernel against the CPU on a small grid (every cell, ghosts included), then the
// tuned kernel against the reference at the timed size, every cell: a ghost cell written, or an
// interior cell left out, fails.
bool check(const AdvecProblem& p, const AdvecDeviceFields& d, double* dOut, double* dRef) {
    const AdvecProblem small{13, 11, 7};
    const AdvecHostFields hs = advec_inputs(small);
    AdvecDeviceFields ds;
    double* dSmall;
    std::vector<double> gpu, ref, out;
    bool failed = advec_upload(small, hs, ds) || cudaCheck(cudaMalloc(&dSmall, small.cells() * sizeof(double))) ||
                  run_into(small, dSmall, gpu, [&] { return advec_reference(small, ds.view, dSmall); });
    cudaFree(ds.data);
    cudaFree(dSmall);
    if (failed) return false;
    long long at = first_mismatch(gpu, host_tendency(small, hs));
    if (at >= 0) {
        fprintf(stderr, "advec_reference_kernel differs from the CPU at cell %lld of the %dx%dx%d grid\n", at,
                small.itot, small.jtot, small.ktot);
        return false;
    }
    if (run_into(p, dRef, ref, [&] { return advec_reference(p, d.view, dRef); }) ||
        run_into(p, dOut, out, [&] { return advec(p, d.view, dOut); }))
        return false;
    if ((at = first_mismatch(out, ref)) >= 0) {
        const long long jj = p.icells(), kk = jj * p.jcells();
        fprintf(stderr, "advec_kernel is wrong at cell (%lld, %lld, %lld): %.17g, the reference says %.17g\n", at % jj,
                at % kk / jj, at / kk, out[at], ref[at]);
        return false;
    }
    printf("check: ok (%dx%dx%d cells and their ghosts against the reference, which matches the CPU on %dx%dx%d)\n",
           p.itot, p.jtot, p.ktot, small.itot, small.jtot, small.ktot);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("advec: BLOCK=%dx%dx%d TILE=%dx%dx%d STRIDED=%d MIN_BLOCKS=%d\n", ADVEC_BLOCK_X, ADVEC_BLOCK_Y,
           ADVEC_BLOCK_Z, ADVEC_TILE_X, ADVEC_TILE_Y, ADVEC_TILE_Z, ADVEC_STRIDED, ADVEC_MIN_BLOCKS);
    const AdvecProblem& p = o.p;
    AdvecDeviceFields d;
    double *dOut, *dRef;
    if (advec_upload(p, advec_inputs(p), d) || cudaCheck(cudaMalloc(&dOut, p.cells() * sizeof(double))) ||
        cudaCheck(cudaMalloc(&dRef, p.cells() * sizeof(double))))
        return 1;
    if (!check(p, d, dOut, dRef)) {
        fprintf(stderr, "advec: FAILED the check at %dx%dx%d\n", p.itot, p.jtot, p.ktot);
        return 1;
    }
    if (o.check_only) return 0;

    const dim3 grid =
        advec_grid<ADVEC_BLOCK_X, ADVEC_BLOCK_Y, ADVEC_BLOCK_Z, ADVEC_TILE_X, ADVEC_TILE_Y, ADVEC_TILE_Z>(p);
    double median_ms;
    if (!time_one_kernel(o, "advec", "advec_kernel", grid, dim3(ADVEC_BLOCK_X, ADVEC_BLOCK_Y, ADVEC_BLOCK_Z),
                         [&] { return advec(p, d.view, dOut); }, median_ms))
        return 1;
    // Cell updates per second: the work every configuration does alike.
    double cells = double(p.itot) * p.jtot * p.ktot;
    printf("size=%dx%dx%d: median %.4f ms, %.1f G cells/s over %d launches\n", p.itot, p.jtot, p.ktot, median_ms,
           cells / (median_ms * 1e6), o.iters);
    cudaFree(d.data);
    cudaFree(dOut);
    cudaFree(dRef);
    return 0;
}
