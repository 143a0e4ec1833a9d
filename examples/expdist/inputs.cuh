// inputs.cuh: the deterministic inputs expdist.cu and the brute-force harness share.
#pragma once

#include "expdist.cuh"

#include <cstdint>
#include <vector>

// A number in [0, 1) from a linear congruential sequence, the same every run (53 random bits).
inline double expdist_uniform(uint64_t& seed) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return double(seed >> 11) * (1.0 / 9007199254740992.0);
}

// One cloud's points on the host, as three arrays.
struct ExpdistHostCloud {
    std::vector<double> x, y, s;
};

// Points spread over the unit square, each with an uncertainty of 0.5-1.5: every pair's term lies
// between exp(-2) and 1, so the check can see any single term missing (EXPDIST_TOLERANCE). B is
// its own cloud (another seed), not A moved.
inline ExpdistHostCloud expdist_points(int count, uint64_t seed) {
    ExpdistHostCloud c;
    c.x.resize(count);
    c.y.resize(count);
    c.s.resize(count);
    for (int i = 0; i < count; ++i) {
        c.x[i] = expdist_uniform(seed);
        c.y[i] = expdist_uniform(seed);
        c.s[i] = 0.5 + expdist_uniform(seed);
    }
    return c;
}

inline ExpdistHostCloud expdist_cloud_a(const ExpdistProblem& p) { return expdist_points(p.m, 11u); }
inline ExpdistHostCloud expdist_cloud_b(const ExpdistProblem& p) { return expdist_points(p.n, 29u); }

// A cloud on the device: three arrays in one allocation.
struct ExpdistDeviceCloud {
    double* data = nullptr;
    ExpdistCloud view{};
};

// Copies a host cloud to the device; true on a CUDA error.
inline bool expdist_upload(const ExpdistHostCloud& h, ExpdistDeviceCloud& d) {
    const size_t n = h.x.size();
    if (cudaCheck(cudaMalloc(&d.data, 3 * n * sizeof(double))) ||
        cudaCheck(cudaMemcpy(d.data, h.x.data(), n * sizeof(double), cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemcpy(d.data + n, h.y.data(), n * sizeof(double), cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemcpy(d.data + 2 * n, h.s.data(), n * sizeof(double), cudaMemcpyHostToDevice)))
        return true;
    d.view = ExpdistCloud{d.data, d.data + n, d.data + 2 * n};
    return false;
}

// D from the reference kernel's rows: each row summed on the device in order, the rows added on
// the CPU in long double; true on a CUDA error. row: m doubles of device memory.
inline bool expdist_reference_total(const ExpdistProblem& p, ExpdistCloud a, ExpdistCloud b, double* row,
                                    std::vector<double>& rows, long double& total) {
    rows.resize(p.m);
    if (expdist_reference(p, a, b, row) ||
        cudaCheck(cudaMemcpy(rows.data(), row, size_t(p.m) * sizeof(double), cudaMemcpyDeviceToHost)))
        return true;
    total = 0.0L;
    for (double r : rows) total += r;
    return false;
}
