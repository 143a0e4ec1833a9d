// brute_force_main: runs the configurations bench/brute_force.py generated
// (brute_force_entries, in its generated registry), from --start to --end,
// printing one JSON line per configuration; see brute_force.cuh.
//
//   brute_force [--size S] [--start I] [--end J]
#include "brute_force.cuh"
#include "inputs.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

void brute_force_entries(std::vector<BruteForceEntry>& entries);   // generated

int main(int argc, char** argv) {
    BruteForceBench b;
    long start = 0, end = -1;
    auto size = [&](const std::string& name, const char* value) { return name == "--size" && (b.S = atoi(value), true); };
    if (!brute_force_args(argc, argv, start, end, size)) return 2;
    if (b.S < 128 || b.S % 128) {
        fprintf(stderr, "brute_force: --size must be a multiple of 128\n");
        return 2;
    }
    std::vector<BruteForceEntry> entries;
    brute_force_entries(entries);

    const size_t n = size_t(b.S) * b.S;
    std::vector<float> At(n), B(n);
    fill(At, 1);
    fill(B, 2);
    if (cudaCheck(cudaMalloc(&b.dA, n * 4)) || cudaCheck(cudaMalloc(&b.dB, n * 4)) ||
        cudaCheck(cudaMalloc(&b.dC, n * 4)) || cudaCheck(cudaMalloc(&b.dRef, n * 4)) ||
        cudaCheck(cudaMalloc(&b.dBad, sizeof(unsigned))) ||
        cudaCheck(cudaMemcpy(b.dA, At.data(), n * 4, cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemcpy(b.dB, B.data(), n * 4, cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaEventCreate(&b.start)) || cudaCheck(cudaEventCreate(&b.stop)) ||
        xgemm_reference(b.S, b.S, b.S, b.dA, b.dB, b.dRef) || cudaCheck(cudaDeviceSynchronize()))
        return 1;
    brute_force_header("\"size\": " + std::to_string(b.S), entries.size());
    brute_force_run(entries, b, start, end);
    return 0;
}
