// xgemm: checks xgemm_kernel (the configuration conf.cuh names) against the
// reference, then times it at one problem size.
//
//   xgemm [--size S] [--iters N] [--warmup W] [--nvtx] [--check-only] [--json FILE]
//
// --size S       M = N = K = S, a multiple of 128 (every tile of the space divides it)
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
#include "run_options.cuh"
#include "timed_run.cuh"
#include "xgemm.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Options : RunOptions {
    int size = 2048;
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (take_run_option(argc, argv, i, o)) continue;
        if (a == "--size" && i + 1 < argc) o.size = atoi(argv[++i]);
        else {
            fprintf(stderr, "xgemm: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    if (o.size < 128 || o.size > 8192 || o.size % 128 || o.iters < 1 || o.warmup < 0) {
        fprintf(stderr, "xgemm: need --size a multiple of 128 in 128..8192, --iters >= 1, --warmup >= 0\n");
        return false;
    }
    return true;
}

// Every element of the kernel's C against the reference kernel's, within
// atol + |ref| * rtol; the reference itself is spot-checked on the CPU (in
// double), so a bug the two kernels share is caught too.
bool check(int S, const float* dA, const float* dB, float* dC, float* dRef, const std::vector<float>& At,
           const std::vector<float>& B) {
    const double atol = 1e-4 * std::sqrt(double(S)), rtol = 1e-4;
    size_t elems = size_t(S) * S;
    if (cudaCheck(cudaMemset(dC, 0, elems * 4)) || xgemm(S, S, S, dA, dB, dC) || xgemm_reference(S, S, S, dA, dB, dRef))
        return false;
    std::vector<float> Ct(elems), ref(elems);
    if (cudaCheck(cudaMemcpy(Ct.data(), dC, elems * 4, cudaMemcpyDeviceToHost)) ||
        cudaCheck(cudaMemcpy(ref.data(), dRef, elems * 4, cudaMemcpyDeviceToHost)))
        return false;
    for (int probe = 0; probe < 32; ++probe) {
        int m = int((probe * 7919u) % unsigned(S)), n = int((probe * 104729u) % unsigned(S));
        double want = 0;
        for (int k = 0; k < S; ++k) want += double(At[size_t(k) * S + m]) * B[size_t(k) * S + n];
        double got = ref[size_t(n) * S + m];
        if (std::fabs(got - want) > atol + std::fabs(want) * rtol) {
            fprintf(stderr, "xgemm_reference_kernel is wrong at C[%d][%d] = %g, the CPU says %g\n", m, n, got, want);
            return false;
        }
    }
    for (size_t i = 0; i < elems; ++i) {
        if (!(std::fabs(Ct[i] - ref[i]) <= atol + std::fabs(ref[i]) * rtol)) {
            fprintf(stderr, "xgemm_kernel is wrong at C[%zu][%zu] = %g, the reference says %g\n", i % S, i / S,
                    Ct[i], ref[i]);
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("xgemm: MWG=%d NWG=%d KWG=%d MDIMC=%d NDIMC=%d MDIMA=%d NDIMB=%d VWM=%d VWN=%d SA=%d SB=%d, %d threads\n",
           XGEMM_MWG, XGEMM_NWG, XGEMM_KWG, XGEMM_MDIMC, XGEMM_NDIMC, XGEMM_MDIMA, XGEMM_NDIMB, XGEMM_VWM, XGEMM_VWN,
           XGEMM_SA, XGEMM_SB, XGEMM_THREADS);
    const int S = o.size;
    size_t elems = size_t(S) * S;
    std::vector<float> At(elems), B(elems);
    fill(At, 1);
    fill(B, 2);
    float *dA, *dB, *dC, *dRef;
    if (cudaCheck(cudaMalloc(&dA, elems * 4)) || cudaCheck(cudaMalloc(&dB, elems * 4)) ||
        cudaCheck(cudaMalloc(&dC, elems * 4)) || cudaCheck(cudaMalloc(&dRef, elems * 4)) ||
        cudaCheck(cudaMemcpy(dA, At.data(), elems * 4, cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemcpy(dB, B.data(), elems * 4, cudaMemcpyHostToDevice)))
        return 1;
    if (!check(S, dA, dB, dC, dRef, At, B)) {
        fprintf(stderr, "xgemm: FAILED the check at %d x %d x %d\n", S, S, S);
        return 1;
    }
    printf("check: ok\n");
    if (o.check_only) return 0;

    double median_ms;
    if (!time_one_kernel(o, "xgemm", "xgemm_kernel", dim3(S / XGEMM_MWG, S / XGEMM_NWG), dim3(XGEMM_THREADS),
                         [&] { return xgemm(S, S, S, dA, dB, dC); }, median_ms))
        return 1;
    double s = S;
    printf("M=N=K=%d: median %.4f ms, %.0f GFLOP/s over %d launches\n", S, median_ms, 2 * s * s * s / (median_ms * 1e6),
           o.iters);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaFree(dRef);
    return 0;
}
