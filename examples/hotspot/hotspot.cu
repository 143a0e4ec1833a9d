// hotspot: checks hotspot_kernel (the configuration conf.cuh names) against the
// reference, then times it at one problem size.
//
//   hotspot [--size W,H] [--iters N] [--warmup W] [--nvtx] [--check-only] [--json FILE]
//
// --size W,H     the grid of cells (default 2048,2048); a run advances it 60 steps
// --iters N      timed runs (each HOTSPOT_STEPS steps: 60 / HOTSPOT_TEMPORAL launches)
// --warmup W     untimed runs first (outside any NVTX range)
// --nvtx         wrap each timed run in an NVTX range named "iteration"
// --check-only   exit after the correctness check (0: right, 1: wrong)
// --json FILE    write the event timing of every run as engine-timing/1 JSON
//                (what the sweep's events backend reads)
//
// The check runs first, every time, at the timed size: a sweep's
// `verify: profile` needs no separate check run (exit 1 before any timing).
#include "hotspot.cuh"
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
    HotspotProblem p;
};

bool parse(int argc, char** argv, Options& o) {
    return parse_sized_run(argc, argv, "hotspot", "W,H", 16384, o, {&o.p.width, &o.p.height});
}

// HOTSPOT_STEPS steps on the CPU, for checking the reference kernel on a small grid.
std::vector<float> host_steps(const HotspotProblem& p, const HotspotCoefficients& c, std::vector<float> t,
                              const std::vector<float>& power) {
    const int w = p.width, h = p.height;
    std::vector<float> next(t.size());
    for (int s = 0; s < HOTSPOT_STEPS; ++s) {
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const size_t i = size_t(y) * w + x;
                const float v = t[i];
                next[i] = hotspot_step(c, v, y > 0 ? t[i - w] : v, y < h - 1 ? t[i + w] : v, x < w - 1 ? t[i + 1] : v,
                                       x > 0 ? t[i - 1] : v, power[i]);
            }
        t.swap(next);
    }
    return t;
}

// The largest difference between two grids, and where.
float largest_difference(const std::vector<float>& a, const std::vector<float>& b, size_t& at) {
    float worst = 0.0f;
    at = 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (!(std::fabs(a[i] - b[i]) <= worst)) worst = std::fabs(a[i] - b[i]), at = i;   // NaN counts as worst
    return worst;
}

// Runs the reference kernel from `temp` and copies back where it ends; true on a CUDA error.
bool reference_run(const HotspotProblem& p, const HotspotCoefficients& c, const std::vector<float>& temp,
                   const std::vector<float>& power, std::vector<float>& out) {
    const size_t n = temp.size();
    float *dPower, *dA, *dB;
    bool failed = cudaCheck(cudaMalloc(&dPower, n * 4)) || cudaCheck(cudaMalloc(&dA, n * 4)) ||
                  cudaCheck(cudaMalloc(&dB, n * 4)) ||
                  cudaCheck(cudaMemcpy(dPower, power.data(), n * 4, cudaMemcpyHostToDevice)) ||
                  cudaCheck(cudaMemcpy(dA, temp.data(), n * 4, cudaMemcpyHostToDevice)) ||
                  hotspot_reference(p, c, dPower, dA, dB);
    out.resize(n);
    failed = failed || cudaCheck(cudaMemcpy(out.data(), hotspot_result(HOTSPOT_STEPS, dA, dB), n * 4,
                                            cudaMemcpyDeviceToHost));
    cudaFree(dPower);
    cudaFree(dA);
    cudaFree(dB);
    return failed;
}

// The reference kernel against the CPU on a small grid (every cell, its edges included), then
// the tuned kernel against the reference at the timed size, every cell.
bool check(const HotspotProblem& p, const HotspotCoefficients& c, const std::vector<float>& temp,
           const std::vector<float>& power, const float* dPower, float* dA, float* dB) {
    const HotspotProblem small{97, 61};
    std::vector<float> st, sp, gpu;
    hotspot_inputs(small, st, sp);
    if (reference_run(small, c, st, sp, gpu)) return false;
    size_t at;
    const float ref_err = largest_difference(gpu, host_steps(small, c, st, sp), at);
    if (!(ref_err <= HOTSPOT_TOLERANCE)) {
        fprintf(stderr, "hotspot_reference_kernel differs from the CPU by %g at cell (%zu, %zu) of %dx%d\n", ref_err,
                at % small.width, at / small.width, small.width, small.height);
        return false;
    }
    std::vector<float> ref, out(temp.size());
    if (reference_run(p, c, temp, power, ref) ||
        cudaCheck(cudaMemcpy(dA, temp.data(), temp.size() * 4, cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemset(dB, 0xff, temp.size() * 4)) || hotspot(p, c, dPower, dA, dB) ||
        cudaCheck(cudaMemcpy(out.data(), hotspot_result(HOTSPOT_STEPS / HOTSPOT_TEMPORAL, dA, dB), temp.size() * 4,
                             cudaMemcpyDeviceToHost)))
        return false;
    const float err = largest_difference(out, ref, at);
    if (!(err <= HOTSPOT_TOLERANCE)) {
        fprintf(stderr, "hotspot_kernel is wrong at cell (%zu, %zu): %g, the reference says %g\n", at % p.width,
                at / p.width, out[at], ref[at]);
        return false;
    }
    printf("check: ok (%d steps of %dx%d cells; largest difference %g from the reference, %g from the CPU's on %dx%d)\n",
           HOTSPOT_STEPS, p.width, p.height, err, ref_err, small.width, small.height);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("hotspot: BLOCK=%dx%d TILE=%dx%d TEMPORAL=%d UNROLL=%d SH_POWER=%d\n", HOTSPOT_BLOCK_X, HOTSPOT_BLOCK_Y,
           HOTSPOT_TILE_X, HOTSPOT_TILE_Y, HOTSPOT_TEMPORAL, HOTSPOT_UNROLL, HOTSPOT_SH_POWER);
    const HotspotProblem& p = o.p;
    const HotspotCoefficients c;
    std::vector<float> temp, power;
    hotspot_inputs(p, temp, power);
    const size_t n = temp.size();
    float *dPower, *dA, *dB;
    if (cudaCheck(cudaMalloc(&dPower, n * 4)) || cudaCheck(cudaMalloc(&dA, n * 4)) ||
        cudaCheck(cudaMalloc(&dB, n * 4)) || cudaCheck(cudaMemcpy(dPower, power.data(), n * 4, cudaMemcpyHostToDevice)))
        return 1;
    if (!check(p, c, temp, power, dPower, dA, dB)) {
        fprintf(stderr, "hotspot: FAILED the check at %dx%d\n", p.width, p.height);
        return 1;
    }
    if (o.check_only) return 0;

    // The timed runs go on from where the check left the temperatures: the same work each run.
    dim3 grid(CEIL_DIV(p.width, HOTSPOT_BLOCK_X * HOTSPOT_TILE_X), CEIL_DIV(p.height, HOTSPOT_BLOCK_Y * HOTSPOT_TILE_Y));
    double median_ms;
    if (!time_one_kernel(o, "hotspot", "hotspot_kernel", grid, dim3(HOTSPOT_BLOCK_X, HOTSPOT_BLOCK_Y),
                         [&] { return hotspot(p, c, dPower, dA, dB); }, median_ms))
        return 1;
    // Cell updates per second: the work every configuration does alike (halos not counted).
    double updates = double(n) * HOTSPOT_STEPS;
    printf("size=%dx%d steps=%d: median %.4f ms, %.1f G cell-steps/s over %d runs\n", p.width, p.height, HOTSPOT_STEPS,
           median_ms, updates / (median_ms * 1e6), o.iters);
    cudaFree(dPower);
    cudaFree(dA);
    cudaFree(dB);
    return 0;
}
