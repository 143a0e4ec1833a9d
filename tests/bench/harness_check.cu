// harness_check: bench/brute_force_harness.cuh's check and measurement on
// known cases, one JSON object on stdout (tests/gpu/test_brute_force_gpu.py
// reads it; tests/bench/test_brute_force.py only builds it).
//
//   all_match:  equal outputs pass; one wrong element (the last of an odd
//               count, past the last full block), a NaN, fail; none passes
//   measure:    a check that says no fails the configuration as "wrong
//               result"; a launch that cannot start fails it with CUDA's
//               words, and the next configuration still measures
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

struct BruteForceBench {};   // the harness's list type needs one; nothing here runs a list

#include "brute_force_harness.cuh"

struct Equal {
    const float *out, *ref;
    __device__ bool operator()(size_t i) const { return out[i] == ref[i]; }
};

__global__ void fill(float* x, size_t n, float v) {
    size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

static const char* verdict(const BruteForceResult& r) { return r.failure ? r.detail : "measured"; }

int main() {
    const size_t n = 1000003;   // not a multiple of the count's 256 threads
    float *out, *ref;
    unsigned* bad;
    cudaEvent_t start, stop;
    if (cudaMalloc(&out, n * 4) || cudaMalloc(&ref, n * 4) || cudaMalloc(&bad, 4) || cudaEventCreate(&start) ||
        cudaEventCreate(&stop))
        return 1;
    const unsigned blocks = unsigned((n + 255) / 256);
    fill<<<blocks, 256>>>(out, n, 1.0f);
    fill<<<blocks, 256>>>(ref, n, 1.0f);
    const bool equal = brute_force_all_match(n, Equal{out, ref}, bad);
    const float two = 2.0f, nan = NAN;
    cudaMemcpy(out + n - 1, &two, 4, cudaMemcpyHostToDevice);
    const bool last_wrong = brute_force_all_match(n, Equal{out, ref}, bad);
    const bool last_unchecked = brute_force_all_match(n - 1, Equal{out, ref}, bad);
    cudaMemcpy(out, &nan, 4, cudaMemcpyHostToDevice);
    const bool first_nan = brute_force_all_match(n, Equal{out, ref}, bad);
    const bool none = brute_force_all_match(0, Equal{out, ref}, bad);

    auto launch = [&]() {
        fill<<<blocks, 256>>>(out, n, 3.0f);
        return cudaGetLastError();
    };
    BruteForceResult refused = brute_force_measure(start, stop, launch, [] { return false; });
    BruteForceResult unstartable = brute_force_measure(start, stop, [&]() {
        fill<<<1, 4096>>>(out, n, 3.0f);   // more threads than a block may have
        return cudaGetLastError();
    }, [] { return true; });
    BruteForceResult measured = brute_force_measure(start, stop, launch, [] { return true; });

    printf("{\"equal\": %s, \"last_wrong\": %s, \"last_unchecked\": %s, \"first_nan\": %s, \"none\": %s, "
           "\"refused\": \"%s\", \"unstartable\": \"%s\", \"measured\": \"%s\", \"times\": %zu}\n",
           equal ? "true" : "false", last_wrong ? "true" : "false", last_unchecked ? "true" : "false",
           first_nan ? "true" : "false", none ? "true" : "false", verdict(refused), verdict(unstartable),
           verdict(measured), measured.times_ms.size());
    return 0;
}
