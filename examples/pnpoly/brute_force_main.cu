// brute_force_main: runs the configurations bench/brute_force.py generated,
// from --start to --end, printing one JSON line per configuration (see
// brute_force.cuh); here only the bench's setup.
//
//   brute_force [--start I] [--end J]       (the problem: PnpolyProblem's defaults)
#include "brute_force.cuh"
#include "inputs.cuh"

#include <string>
#include <vector>

int main(int argc, char** argv) {
    return brute_force_main(argc, argv, [](BruteForceBench& b, std::string& problem) {
        b.poly = pnpoly_polygon();
        std::vector<float2> points = pnpoly_points(b.p);
        const size_t n = size_t(b.p.points);
        if (cudaCheck(cudaMalloc(&b.dPoints, n * sizeof(float2))) || cudaCheck(cudaMalloc(&b.dOut, n * 4)) ||
            cudaCheck(cudaMalloc(&b.dRef, n * 4)) || cudaCheck(cudaMalloc(&b.dAmb, n * 4)) ||
            cudaCheck(cudaMalloc(&b.dBad, sizeof(unsigned))) ||
            cudaCheck(cudaMemcpy(b.dPoints, points.data(), n * sizeof(float2), cudaMemcpyHostToDevice)) ||
            cudaCheck(cudaEventCreate(&b.start)) || cudaCheck(cudaEventCreate(&b.stop)) ||
            pnpoly_reference(b.poly, b.p, b.dPoints, b.dRef, b.dAmb, PNPOLY_MARGIN) ||
            cudaCheck(cudaDeviceSynchronize()))
            return 1;
        problem = "\"problem_size\": [" + std::to_string(b.p.points) + ", " + std::to_string(PNPOLY_VERTICES) + "]";
        return 0;
    });
}
