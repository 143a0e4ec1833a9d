// quick_check: a program written for measuring the sweep itself (bench/scaling.py): each
// run takes about a second, some configurations fail their own check within a moment,
// and some are refused at build (scale.cuh says which and why).
//
//   quick_check [--iters N] [--warmup W] [--passes P] [--n ELEMS] [--nvtx] [--check-only]
//
// --iters N      timed iterations (default 20), each P launches of scale_kernel over n floats
// --warmup W     untimed iterations first (default 2), outside any NVTX range
// --passes P     launches per iteration (default 100): what makes a run last about a second
// --n ELEMS      floats in the timed buffers (default 2^26: 256 MB each of in and out)
// --nvtx         wrap each timed iteration in an NVTX range named "iteration" (a sweep's
//                samples are then its iterations, and its race can take turns)
// --check-only   exit after the early check (0: right, 1: wrong)
//
// Order: the early check (n = 1000003, no multiple of any tile: a wrong configuration exits 1
// before anything else), the timed buffers and their fill, the warm-up, the timed iterations,
// then every element of the timed output checked on the CPU (exit 1 at the first wrong one).
#include "scale.cuh"

#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr long long CHECK_N = 1000003;
constexpr long long MAX_N = 1LL << 28;

struct Options {
    int iters = 20, warmup = 2, passes = 100;
    long long n = 1LL << 26;
    bool nvtx = false, check_only = false;
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool has_value = i + 1 < argc;
        if (a == "--nvtx") o.nvtx = true;
        else if (a == "--check-only") o.check_only = true;
        else if (a == "--iters" && has_value) o.iters = atoi(argv[++i]);
        else if (a == "--warmup" && has_value) o.warmup = atoi(argv[++i]);
        else if (a == "--passes" && has_value) o.passes = atoi(argv[++i]);
        else if (a == "--n" && has_value) o.n = atoll(argv[++i]);
        else {
            fprintf(stderr, "quick_check: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    if (o.iters < 1 || o.warmup < 0 || o.passes < 1 || o.n < 1 || o.n > MAX_N) {
        fprintf(stderr, "quick_check: need --iters >= 1, --warmup >= 0, --passes >= 1, --n in 1..%lld\n", MAX_N);
        return false;
    }
    return true;
}

float input(long long i) { return float(i % 1000) * 0.001f - 0.5f; }

// Runs one launch over the first n floats (out pre-filled with a NaN pattern, so an element
// the kernel never writes cannot pass) and checks each against 2 * in + 1.
bool checked(const float* dIn, float* dOut, long long n, std::vector<float>& out, bool fill_first) {
    out.resize(size_t(n));
    if ((fill_first && cudaCheck(cudaMemset(dOut, 0xFF, size_t(n) * 4))) || (fill_first && scale(dIn, dOut, n)) ||
        cudaCheck(cudaMemcpy(out.data(), dOut, size_t(n) * 4, cudaMemcpyDeviceToHost)))
        return false;
    for (long long i = 0; i < n; ++i) {
        float want = 2.0f * input(i) + 1.0f;
        if (memcmp(&want, &out[size_t(i)], 4) != 0) {
            fprintf(stderr, "quick_check: scale_kernel (BLOCK=%d ITEMS=%d VEC=%d FAST_TAIL=%d) is wrong at n=%lld: "
                            "out[%lld] = %g, want %g\n", QC_BLOCK, QC_ITEMS, QC_VEC, QC_FAST_TAIL, n, i,
                    out[size_t(i)], want);
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("quick_check: BLOCK=%d ITEMS=%d VEC=%d FAST_TAIL=%d, tile %d floats, %d B shared memory\n", QC_BLOCK,
           QC_ITEMS, QC_VEC, QC_FAST_TAIL, QC_TILE, QC_SMEM_BYTES);
    const long long most = o.n > CHECK_N ? o.n : CHECK_N;
    std::vector<float> host(static_cast<size_t>(most));
    for (long long i = 0; i < most; ++i) host[size_t(i)] = input(i);
    float *dIn, *dOut;
    if (cudaCheck(cudaMalloc(&dIn, size_t(most) * 4)) || cudaCheck(cudaMalloc(&dOut, size_t(most) * 4)) ||
        cudaCheck(cudaMemcpy(dIn, host.data(), size_t(most) * 4, cudaMemcpyHostToDevice)))
        return 1;
    std::vector<float> out;

    // The early check: a wrong configuration exits here, within a moment.
    if (!checked(dIn, dOut, CHECK_N, out, true)) {
        fprintf(stderr, "quick_check: FAILED the early check (n=%lld)\n", CHECK_N);
        return 1;
    }
    printf("early check: ok (n=%lld)\n", CHECK_N);
    if (o.check_only) return 0;

    if (cudaCheck(cudaMemset(dOut, 0xFF, size_t(o.n) * 4))) return 1;
    for (int it = 0; it < o.warmup; ++it)
        for (int p = 0; p < o.passes; ++p)
            if (scale(dIn, dOut, o.n)) return 1;
    cudaEvent_t start, stop;
    if (cudaCheck(cudaEventCreate(&start)) || cudaCheck(cudaEventCreate(&stop)) ||
        cudaCheck(cudaDeviceSynchronize()) || cudaCheck(cudaProfilerStart()) || cudaCheck(cudaEventRecord(start)))
        return 1;
    for (int it = 0; it < o.iters; ++it) {
        if (o.nvtx) nvtxRangePushA("iteration");
        for (int p = 0; p < o.passes; ++p)
            if (scale(dIn, dOut, o.n)) return 1;
        if (o.nvtx) {
            if (cudaCheck(cudaDeviceSynchronize())) return 1;   // the range holds its iteration's GPU work
            nvtxRangePop();
        }
    }
    float ms = 0;
    if (cudaCheck(cudaEventRecord(stop)) || cudaCheck(cudaEventSynchronize(stop)) ||
        cudaCheck(cudaEventElapsedTime(&ms, start, stop)) || cudaCheck(cudaProfilerStop()))
        return 1;
    if (!checked(dIn, dOut, o.n, out, false)) {
        fprintf(stderr, "quick_check: FAILED the check of the timed output (n=%lld)\n", o.n);
        return 1;
    }
    printf("n=%lld: %d iterations of %d launches, %.3f ms an iteration, %.0f GB/s; check ok\n", o.n, o.iters,
           o.passes, ms / o.iters, 8.0 * double(o.n) * o.passes * o.iters / (ms * 1e6));
    if (cudaCheck(cudaFree(dIn)) || cudaCheck(cudaFree(dOut))) return 1;
    return 0;
}
