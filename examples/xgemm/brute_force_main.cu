// brute_force_main: runs the configurations bench/brute_force.py generated,
// from --start to --end, printing one JSON line per configuration (see
// brute_force.cuh); here only the bench's setup.
//
//   brute_force [--start I] [--end J] [--size S]   (S: a multiple of 128, 2048 unless given)
#include "brute_force.cuh"
#include "inputs.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    auto size = [](BruteForceBench& b, const std::string& name, const char* value) {
        return name == "--size" && (b.S = atoi(value), true);
    };
    return brute_force_main(argc, argv, [](BruteForceBench& b, std::string& problem) {
        if (b.S < 128 || b.S % 128) {
            fprintf(stderr, "brute_force: --size must be a multiple of 128\n");
            return 2;
        }
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
        problem = "\"size\": " + std::to_string(b.S);
        return 0;
    }, size);
}
