// brute_force_main: runs the configurations bench/brute_force.py generated,
// from --start to --end, printing one JSON line per configuration (see
// brute_force.cuh); here only the bench's setup.
//
//   brute_force [--start I] [--end J]       (the problem: ExpdistProblem's defaults)
#include "brute_force.cuh"
#include "inputs.cuh"

#include <string>
#include <vector>

int main(int argc, char** argv) {
    return brute_force_main(argc, argv, [](BruteForceBench& b, std::string& problem) {
        ExpdistDeviceCloud a, c;
        double* dRow;
        std::vector<double> rows;
        if (expdist_upload(expdist_cloud_a(b.p), a) || expdist_upload(expdist_cloud_b(b.p), c) ||
            cudaCheck(cudaMalloc(&b.dPartial, expdist_max_blocks(b.p) * sizeof(double))) ||
            cudaCheck(cudaMalloc(&b.dResult, sizeof(double))) || cudaCheck(cudaMalloc(&b.dFinished, sizeof(unsigned))) ||
            cudaCheck(cudaMalloc(&dRow, size_t(b.p.m) * sizeof(double))) ||
            cudaCheck(cudaEventCreate(&b.start)) || cudaCheck(cudaEventCreate(&b.stop)))
            return 1;
        b.a = a.view;
        b.b = c.view;
        if (expdist_reference_total(b.p, b.a, b.b, dRow, rows, b.reference)) return 1;
        problem = "\"problem_size\": [" + std::to_string(b.p.m) + ", " + std::to_string(b.p.n) + "]";
        return 0;
    });
}
