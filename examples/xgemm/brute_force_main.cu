// brute_force_main: runs the configurations bench/xgemm_brute.py generated
// (brute_force_entries, in its generated registry), from --start to --end,
// printing one JSON line per configuration; see brute_force.cuh.
//
//   brute_force [--size S] [--start I] [--end J]
#include "brute_force.cuh"
#include "inputs.cuh"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

void brute_force_entries(std::vector<BruteForceEntry>& entries);   // generated

int main(int argc, char** argv) {
    BruteForceBench b;
    long start = 0, end = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--size") b.S = atoi(argv[i + 1]);
        else if (a == "--start") start = atol(argv[i + 1]);
        else if (a == "--end") end = atol(argv[i + 1]);
        else {
            fprintf(stderr, "brute_force: unknown argument '%s'\n", a.c_str());
            return 2;
        }
    }
    if (b.S < 128 || b.S % 128) {
        fprintf(stderr, "brute_force: --size must be a multiple of 128\n");
        return 2;
    }
    std::vector<BruteForceEntry> entries;
    brute_force_entries(entries);
    if (end < 0 || end > long(entries.size())) end = long(entries.size());

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
    cudaDeviceProp prop;
    int driver = 0;
    cudaGetDeviceProperties(&prop, 0);
    cudaDriverGetVersion(&driver);
    printf("{\"device\": \"%s\", \"driver\": %d, \"size\": %d, \"count\": %zu}\n", prop.name, driver, b.S, entries.size());
    fflush(stdout);
    for (long i = start; i < end; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        BruteForceResult r = entries[i].run(b);
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("{\"i\": %ld, \"key\": \"%s\", \"wall_s\": %.6f, ", i, entries[i].key, wall);
        if (r.failure) {
            printf("\"failure\": \"%s\", \"detail\": \"%s\"}\n", r.failure, r.detail);
        } else {
            printf("\"times\": [");
            for (size_t k = 0; k < r.times_ms.size(); ++k) printf("%s%.6f", k ? ", " : "", r.times_ms[k]);
            printf("]}\n");
        }
        fflush(stdout);
    }
    return 0;
}
