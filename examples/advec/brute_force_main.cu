// brute_force_main: runs the configurations bench/brute_force.py generated,
// from --start to --end, printing one JSON line per configuration (see
// brute_force.cuh); here only the bench's setup.
//
//   brute_force [--start I] [--end J]       (the problem: AdvecProblem's defaults)
#include "brute_force.cuh"

#include <string>
#include <vector>

int main(int argc, char** argv) {
    return brute_force_main(argc, argv, [](BruteForceBench& b, std::string& problem) {
        AdvecDeviceFields d;
        const size_t n = b.p.cells();
        if (advec_upload(b.p, advec_inputs(b.p), d) || cudaCheck(cudaMalloc(&b.dOut, n * sizeof(double))) ||
            cudaCheck(cudaMalloc(&b.dRef, n * sizeof(double))) || cudaCheck(cudaMalloc(&b.dBad, sizeof(unsigned))) ||
            cudaCheck(cudaMemset(b.dRef, 0xff, n * sizeof(double))) || cudaCheck(cudaEventCreate(&b.start)) ||
            cudaCheck(cudaEventCreate(&b.stop)))
            return 1;
        b.f = d.view;
        if (advec_reference(b.p, b.f, b.dRef) || cudaCheck(cudaDeviceSynchronize())) return 1;
        problem = "\"problem_size\": [" + std::to_string(b.p.itot) + ", " + std::to_string(b.p.jtot) + ", " +
                  std::to_string(b.p.ktot) + "]";
        return 0;
    });
}
