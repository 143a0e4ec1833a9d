// brute_force_main: runs the configurations bench/brute_force.py generated
// (brute_force_entries, in its generated registry), from --start to --end,
// printing one JSON line per configuration; see brute_force.cuh.
//
//   brute_force [--start I] [--end J]       (the problem: HotspotProblem's defaults)
#include "inputs.cuh"
#include "brute_force.cuh"

#include <cstdio>
#include <string>
#include <vector>

void brute_force_entries(std::vector<BruteForceEntry>& entries);   // generated

int main(int argc, char** argv) {
    BruteForceBench b;
    long start = 0, end = -1;
    if (!brute_force_args(argc, argv, start, end)) return 2;
    std::vector<BruteForceEntry> entries;
    brute_force_entries(entries);

    std::vector<float> temp, power;
    hotspot_inputs(b.p, temp, power);
    const size_t n = temp.size();
    if (cudaCheck(cudaMalloc(&b.dPower, n * 4)) || cudaCheck(cudaMalloc(&b.dInit, n * 4)) ||
        cudaCheck(cudaMalloc(&b.dA, n * 4)) || cudaCheck(cudaMalloc(&b.dB, n * 4)) ||
        cudaCheck(cudaMalloc(&b.dRef, n * 4)) || cudaCheck(cudaMalloc(&b.dBad, sizeof(unsigned))) ||
        cudaCheck(cudaMemcpy(b.dPower, power.data(), n * 4, cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemcpy(b.dInit, temp.data(), n * 4, cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemcpy(b.dRef, temp.data(), n * 4, cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaEventCreate(&b.start)) || cudaCheck(cudaEventCreate(&b.stop)))
        return 1;
    // The reference run from the initial temperatures, ending in dRef (an even number of steps).
    if (hotspot_reference(b.p, b.c, b.dPower, b.dRef, b.dA) || cudaCheck(cudaDeviceSynchronize())) return 1;
    static_assert(HOTSPOT_STEPS % 2 == 0, "the reference run ends where it started");
    brute_force_header("\"problem_size\": [" + std::to_string(b.p.width) + ", " + std::to_string(b.p.height) + "]",
                       entries.size());
    brute_force_run(entries, b, start, end);
    return 0;
}
