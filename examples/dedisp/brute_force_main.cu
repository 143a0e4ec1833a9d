// brute_force_main: runs the configurations bench/brute_force.py generated,
// from --start to --end, printing one JSON line per configuration (see
// brute_force.cuh); here only the bench's setup.
//
//   brute_force [--start I] [--end J]       (the problem: DedispProblem's defaults)
#include "brute_force.cuh"
#include "inputs.cuh"

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    return brute_force_main(argc, argv, [](BruteForceBench& b, std::string& problem) {
        const DedispProblem& p = b.p;
        std::vector<uint8_t> in = dedisp_input(p);
        std::vector<float> delay = dedisp_delays(p);
        if (delay.empty()) {
            fprintf(stderr, "brute_force: the largest shift does not fit the input row\n");
            return 2;
        }
        const size_t n = size_t(p.samples) * p.dms;
        if (cudaCheck(cudaMalloc(&b.dIn, in.size())) || cudaCheck(cudaMalloc(&b.dDelay, delay.size() * 4)) ||
            cudaCheck(cudaMalloc(&b.dOut, n * 4)) || cudaCheck(cudaMalloc(&b.dRef, n * 4)) ||
            cudaCheck(cudaMalloc(&b.dBad, sizeof(unsigned))) ||
            cudaCheck(cudaMemcpy(b.dIn, in.data(), in.size(), cudaMemcpyHostToDevice)) ||
            cudaCheck(cudaMemcpy(b.dDelay, delay.data(), delay.size() * 4, cudaMemcpyHostToDevice)) ||
            cudaCheck(cudaEventCreate(&b.start)) || cudaCheck(cudaEventCreate(&b.stop)) ||
            dedisp_reference(p, b.dIn, b.dDelay, b.dRef) || cudaCheck(cudaDeviceSynchronize()))
            return 1;
        problem = "\"problem_size\": [" + std::to_string(p.samples) + ", " + std::to_string(p.dms) + ", " +
                  std::to_string(p.channels) + "]";
        return 0;
    });
}
