// bench.h: what the timing programs (kernel_bench, matmul_tiles) share.
#pragma once
#include <functional>
#include <random>
#include <vector>

#include "../common.cuh"
#include "stats.h"

// Median time in ms of `launch` over reps runs (after 3 warm-ups), from CUDA
// events; -1 when a launch fails.
inline double time_ms(int reps, const std::function<int()>& launch) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 3; ++i)
        if (launch()) return -1;
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        cudaEventRecord(a);
        if (launch()) return -1;
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return summarize(t).median;
}

// n uniform floats in [lo, hi) on the device (seeded by n: the same inputs every run).
inline float* device_random(size_t n, float lo = -1.f, float hi = 1.f) {
    std::vector<float> h(n);
    std::mt19937 rng(n);
    std::uniform_real_distribution<float> d(lo, hi);
    for (auto& x : h) x = d(rng);
    float* p = nullptr;
    if (cudaCheck(cudaMalloc(&p, n * sizeof(float)))) return nullptr;
    cudaCheck(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return p;
}
