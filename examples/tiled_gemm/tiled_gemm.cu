// tiled_gemm: checks gemm_tiled_kernel against the reference, then times it at
// several problem sizes, so one kernel runs at several launch shapes (grids).
//
//   tiled_gemm [--iters N] [--warmup W] [--sizes 256,512,1024] [--nvtx] [--check-only] [--json FILE]
//              [--no-profiler-range] [--pause-ms P] [--crash-after I [--crash-how abort|segv]]
//
// --iters N      timed iterations; each launches the kernel once per size
// --warmup W     untimed iterations first (outside any NVTX range)
// --sizes LIST   square problem sizes M = N = K
// --nvtx         wrap each timed iteration in an NVTX range named "iteration"
//                (what the sweep's nsys and cupti backends attribute launches to)
// --check-only   exit after the correctness check (0: right, 1: wrong)
// --json FILE    write the event timing of every launch as engine-timing/1 JSON
//                (what the sweep's events backend reads)
// --no-profiler-range  do not call cudaProfilerStart/Stop, as many programs do not
//                (for testing how nsys and ncu capture such a program)
// --pause-ms P   sleep P ms of host time after each timed iteration (host work
//                between iterations; makes a run last long enough to be killed)
// --crash-after I  die inside timed iteration I (0-based), after its launches
//                were issued: for testing profilers on a crashing program
//
// The timed iterations run between cudaProfilerStart and cudaProfilerStop, so
// `nsys profile --capture-range=cudaProfilerApi` captures just them. The check
// runs first, every time: a sweep's `verify: profile` needs no separate check
// run (exit 1 before any timing when the tiles compute wrong results).
#include "engine_timing.cuh"
#include "gemm.cuh"
#include "gemm_check.cuh"
#include "inputs.cuh"
#include "run_options.cuh"

#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

struct Options : RunOptions {
    std::vector<int> sizes = {256, 512, 1024};
    bool profiler_range = true;
    int pause_ms = 0;
    int crash_after = -1;
    std::string crash_how = "abort";
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool has_value = i + 1 < argc;
        if (take_run_option(argc, argv, i, o)) continue;
        if (a == "--no-profiler-range") o.profiler_range = false;
        else if (a == "--pause-ms" && has_value) o.pause_ms = atoi(argv[++i]);
        else if (a == "--crash-after" && has_value) o.crash_after = atoi(argv[++i]);
        else if (a == "--crash-how" && has_value) o.crash_how = argv[++i];
        else if (a == "--sizes" && has_value) o.sizes = int_list(argv[++i]);
        else {
            fprintf(stderr, "tiled_gemm: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    bool sizes_ok = !o.sizes.empty() &&
                    std::all_of(o.sizes.begin(), o.sizes.end(), [](int s) { return s >= 1 && s <= 8192; });
    bool crash_ok = o.crash_how == "abort" || o.crash_how == "segv";
    if (o.iters < 1 || o.warmup < 0 || o.pause_ms < 0 || !sizes_ok || !crash_ok) {
        fprintf(stderr, "tiled_gemm: need --iters >= 1, --warmup >= 0, --pause-ms >= 0, sizes in 1..8192, "
                        "--crash-how abort|segv\n");
        return false;
    }
    return true;
}

[[noreturn]] void crash(const std::string& how) {
    fprintf(stderr, "tiled_gemm: crashing on purpose (--crash-after, %s)\n", how.c_str());
    fflush(stderr);
    if (how == "segv") {
        volatile int* null = nullptr;
        *null = 1;
    }
    abort();
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("tiled_gemm: BM=%d BN=%d BK=%d TM=%d TN=%d, %d threads, %d B shared memory\n", GEMM_BM, GEMM_BN,
           GEMM_BK, GEMM_TM, GEMM_TN, GEMM_THREADS, GEMM_SMEM_BYTES);

    int largest = *std::max_element(o.sizes.begin(), o.sizes.end());
    // Every timed size, and one shape that is no multiple of any tile (edges).
    std::vector<Shape> checks = {{97, 130, 45}};
    for (int s : o.sizes) checks.push_back({s, s, s});
    size_t elems = std::max(size_t(largest) * largest, size_t(130 * 97));
    std::vector<float> A(elems), B(elems);
    fill(A, 1);
    fill(B, 2);
    float *dA, *dB, *dC, *dRef;
    if (cudaCheck(cudaMalloc(&dA, elems * 4)) || cudaCheck(cudaMalloc(&dB, elems * 4)) ||
        cudaCheck(cudaMalloc(&dC, elems * 4)) || cudaCheck(cudaMalloc(&dRef, elems * 4)) ||
        cudaCheck(cudaMemcpy(dA, A.data(), elems * 4, cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemcpy(dB, B.data(), elems * 4, cudaMemcpyHostToDevice)))
        return 1;

    for (const Shape& s : checks) {
        if (!check_gemm(s, dA, dB, dC, dRef, A, B)) {
            fprintf(stderr, "tiled_gemm: FAILED the check at %dx%dx%d\n", s.M, s.N, s.K);
            return 1;
        }
    }
    printf("check: ok (%zu shapes)\n", checks.size());
    if (o.check_only) return 0;

    for (int it = 0; it < o.warmup; ++it)
        for (int s : o.sizes)
            if (gemm_tiled(s, s, s, dA, dB, dC)) return 1;

    size_t n = o.sizes.size();
    std::vector<cudaEvent_t> events(2 * n * o.iters);
    for (cudaEvent_t& e : events)
        if (cudaCheck(cudaEventCreate(&e))) return 1;
    if (cudaCheck(cudaDeviceSynchronize()) || (o.profiler_range && cudaCheck(cudaProfilerStart()))) return 1;
    for (int it = 0; it < o.iters; ++it) {
        if (o.nvtx) nvtxRangePushA("iteration");
        for (size_t j = 0; j < n; ++j) {
            int s = o.sizes[j];
            cudaEvent_t* e = &events[2 * (it * n + j)];
            if (cudaCheck(cudaEventRecord(e[0])) || gemm_tiled(s, s, s, dA, dB, dC) || cudaCheck(cudaEventRecord(e[1])))
                return 1;
        }
        if (it == o.crash_after) crash(o.crash_how);
        if (o.nvtx) nvtxRangePop();
        if (o.pause_ms) usleep(useconds_t(o.pause_ms) * 1000);
    }
    if (cudaCheck(cudaDeviceSynchronize()) || (o.profiler_range && cudaCheck(cudaProfilerStop()))) return 1;

    EngineTiming timing(o.iters, o.warmup);
    for (size_t j = 0; j < n; ++j) {
        int size = o.sizes[j];
        dim3 grid(CEIL_DIV(size, GEMM_BN), CEIL_DIV(size, GEMM_BM));
        std::vector<double> ns(o.iters);
        for (int it = 0; it < o.iters; ++it) {
            float ms = 0;
            if (cudaCheck(cudaEventElapsedTime(&ms, events[2 * (it * n + j)], events[2 * (it * n + j) + 1]))) return 1;
            ns[it] = ms * 1e6;
            timing.add("gemm_tiled_kernel", grid, dim3(GEMM_THREADS), it, ns[it]);
        }
        double median = summarize(ns).median / 1e6, s = size;
        printf("M=N=K=%d: grid %ux%u, median %.4f ms, %.0f GFLOP/s over %d iterations\n", size, grid.x, grid.y, median,
               2 * s * s * s / (median * 1e6), o.iters);
    }
    if (!o.json.empty() && !timing.write(o.json, "tiled_gemm")) return 1;
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaFree(dRef);
    return 0;
}
