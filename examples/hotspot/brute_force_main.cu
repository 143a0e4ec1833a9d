// brute_force_main: runs the configurations bench/brute_force.py generated,
// from --start to --end, printing one JSON line per configuration (see
// brute_force.cuh); here only the bench's setup.
//
//   brute_force [--start I] [--end J]       (the problem: HotspotProblem's defaults)
#include "brute_force.cuh"
#include "inputs.cuh"

#include <string>
#include <vector>

int main(int argc, char** argv) {
    return brute_force_main(argc, argv, [](BruteForceBench& b, std::string& problem) {
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
        problem = "\"problem_size\": [" + std::to_string(b.p.width) + ", " + std::to_string(b.p.height) + "]";
        return 0;
    });
}
