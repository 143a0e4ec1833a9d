// brute_force.cuh: every configuration of a list measured in one process, for
// bench/xgemm_brute.py (which generates the list, compiles it in chunks and
// writes the answers as a Kernel Tuner cache).
//
// A sweep builds and runs one program per configuration; for ground truth over
// 15,364 configurations that costs a CUDA context and a link per point. Here
// each chunk of the list instantiates its kernels from xgemm.cuh's template
// (the same kernel a sweep's conf.cuh instantiates), and one process checks
// and times them all, on the same inputs, one after another:
//
//   1. C is cleared, the kernel runs once, and every element is compared with
//      the reference kernel's result on the GPU (atol + |ref| * rtol, as
//      xgemm.cu checks): a mismatch is recorded as a failure.
//   2. One more launch warms up; then `reps` launches, each between two
//      events; the time is their median (ms).
//
// A launch error is a failure of that configuration; an error that poisons the
// context (the next synchronize fails too) ends the process with exit 3, and
// the driver starts it again after that configuration.
#pragma once

#include "xgemm.cuh"

#include <cstdio>
#include <vector>

struct BruteForceBench {
    int S = 2048;
    float *dA = nullptr, *dB = nullptr, *dC = nullptr, *dRef = nullptr;
    unsigned* dBad = nullptr;
    cudaEvent_t start, stop;
};

// Counts the elements of C outside atol + |ref| * rtol of the reference (NaN included).
static __global__ void xgemm_count_mismatches(const float* c, const float* ref, size_t n, float atol, float rtol,
                                       unsigned* bad) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n && !(fabsf(c[i] - ref[i]) <= atol + fabsf(ref[i]) * rtol)) atomicAdd(bad, 1u);
}

struct BruteForceResult {
    const char* failure = nullptr;     // Kernel Tuner's failure string, or null
    const char* detail = "";
    std::vector<float> times_ms;
};

// One configuration: checked, then timed. A context-poisoning error exits 3.
template <int MWG, int NWG, int KWG, int MDIMC, int NDIMC, int MDIMA, int NDIMB, int VWM, int VWN, int SA, int SB>
BruteForceResult brute_force_one(BruteForceBench& b) {
    const int S = b.S;
    const size_t n = size_t(S) * S;
    auto launch = [&]() {
        return xgemm_launch<MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB, VWM, VWN, SA, SB>(S, S, S, b.dA, b.dB, b.dC);
    };
    // A failed configuration, and why; an error that left the context unusable (the next
    // synchronize fails too) ends the process with exit 3 instead.
    auto failed = [](cudaError_t e, const char* detail) {
        if (e != cudaSuccess && cudaDeviceSynchronize() != cudaSuccess) {
            fprintf(stderr, "brute_force: %s left the context unusable\n", cudaGetErrorString(e));
            exit(3);
        }
        BruteForceResult f;
        f.failure = "RuntimeFailedConfig";
        f.detail = detail;
        return f;
    };
    cudaMemset(b.dC, 0, n * 4);
    cudaMemset(b.dBad, 0, sizeof(unsigned));
    cudaError_t e = launch();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return failed(e, cudaGetErrorString(e));
    const float atol = 1e-4f * sqrtf(float(S)), rtol = 1e-4f;
    xgemm_count_mismatches<<<CEIL_DIV(n, 256), 256>>>(b.dC, b.dRef, n, atol, rtol, b.dBad);
    unsigned bad = 0;
    cudaMemcpy(&bad, b.dBad, sizeof(unsigned), cudaMemcpyDeviceToHost);
    if (bad) return failed(cudaSuccess, "wrong result");
    // One launch between two events: its time in ms, or the error.
    auto timed = [&](float& ms) {
        cudaEventRecord(b.start);
        cudaError_t err = launch();
        cudaEventRecord(b.stop);
        if (err == cudaSuccess) err = cudaEventSynchronize(b.stop);
        if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, b.start, b.stop);
        return err;
    };
    // The warm-up also says how long a launch takes: slow ones get fewer repetitions.
    float first = 0;
    e = timed(first);
    const int reps = first > 20.0f ? 3 : 7;
    BruteForceResult r;
    for (int i = 0; i < reps && e == cudaSuccess; ++i) {
        float ms = 0;
        e = timed(ms);
        r.times_ms.push_back(ms);
    }
    return e == cudaSuccess ? r : failed(e, cudaGetErrorString(e));
}

struct BruteForceEntry {
    const char* key;                                 // the values, comma-separated, in the space's order
    BruteForceResult (*run)(BruteForceBench&);
};
