// brute_force_main: runs the configurations bench/brute_force.py generated
// (brute_force_entries, in its generated registry), from --start to --end,
// printing one JSON line per configuration; see brute_force.cuh.
//
//   brute_force [--start I] [--end J]       (the problem: PnpolyProblem's defaults)
#include "brute_force.cuh"
#include "inputs.cuh"

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

    b.poly = pnpoly_polygon();
    std::vector<float2> points = pnpoly_points(b.p);
    const size_t n = size_t(b.p.points);
    if (cudaCheck(cudaMalloc(&b.dPoints, n * sizeof(float2))) || cudaCheck(cudaMalloc(&b.dOut, n * 4)) ||
        cudaCheck(cudaMalloc(&b.dRef, n * 4)) || cudaCheck(cudaMalloc(&b.dAmb, n * 4)) ||
        cudaCheck(cudaMalloc(&b.dBad, sizeof(unsigned))) ||
        cudaCheck(cudaMemcpy(b.dPoints, points.data(), n * sizeof(float2), cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaEventCreate(&b.start)) || cudaCheck(cudaEventCreate(&b.stop)) ||
        pnpoly_reference(b.poly, b.p, b.dPoints, b.dRef, b.dAmb, PNPOLY_MARGIN) || cudaCheck(cudaDeviceSynchronize()))
        return 1;
    brute_force_header("\"problem_size\": [" + std::to_string(b.p.points) + ", " + std::to_string(PNPOLY_VERTICES) + "]",
                       entries.size());
    brute_force_run(entries, b, start, end);
    return 0;
}
