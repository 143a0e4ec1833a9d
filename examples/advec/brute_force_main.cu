// brute_force_main: runs the configurations bench/brute_force.py generated
// (brute_force_entries, in its generated registry), from --start to --end,
// printing one JSON line per configuration; see brute_force.cuh.
//
//   brute_force [--start I] [--end J]       (the problem: AdvecProblem's defaults)
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

    AdvecDeviceFields d;
    const size_t n = b.p.cells();
    if (advec_upload(b.p, advec_inputs(b.p), d) || cudaCheck(cudaMalloc(&b.dOut, n * sizeof(double))) ||
        cudaCheck(cudaMalloc(&b.dRef, n * sizeof(double))) || cudaCheck(cudaMalloc(&b.dBad, sizeof(unsigned))) ||
        cudaCheck(cudaMemset(b.dRef, 0xff, n * sizeof(double))) || cudaCheck(cudaEventCreate(&b.start)) ||
        cudaCheck(cudaEventCreate(&b.stop)))
        return 1;
    b.f = d.view;
    if (advec_reference(b.p, b.f, b.dRef) || cudaCheck(cudaDeviceSynchronize())) return 1;
    brute_force_header("\"problem_size\": [" + std::to_string(b.p.itot) + ", " + std::to_string(b.p.jtot) + ", " +
                           std::to_string(b.p.ktot) + "]",
                       entries.size());
    brute_force_run(entries, b, start, end);
    return 0;
}
