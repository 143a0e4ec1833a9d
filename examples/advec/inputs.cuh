// inputs.cuh: the deterministic inputs advec.cu and the brute-force harness share.
#pragma once

#include "advec.cuh"

#include <cmath>
#include <cstdint>
#include <vector>

// A number in [0, 1) from a linear congruential sequence, the same every run (53 random bits).
inline double advec_uniform(uint64_t& seed) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return double(seed >> 11) * (1.0 / 9007199254740992.0);
}

// The fields on the host: velocities of -1..1 m/s in every cell (ghosts too), densities that fall
// with height, and a grid that stretches upward (dz from 10 m).
struct AdvecHostFields {
    std::vector<double> u, v, w, rho, rhoh, dzi;
    double dxi = 1.0 / 25.0, dyi = 1.0 / 25.0;
};

inline AdvecHostFields advec_inputs(const AdvecProblem& p) {
    AdvecHostFields h;
    uint64_t seed = 5u;
    for (std::vector<double>* field : {&h.u, &h.v, &h.w}) {
        field->resize(p.cells());
        for (double& x : *field) x = 2.0 * advec_uniform(seed) - 1.0;
    }
    for (int k = 0; k < p.kcells(); ++k) {
        h.rho.push_back(1.2 * std::exp(-10.0 * k / 8000.0));
        h.rhoh.push_back(1.2 * std::exp(-10.0 * (k - 0.5) / 8000.0));
        h.dzi.push_back(1.0 / (10.0 + 0.05 * k));
    }
    return h;
}

// The fields on the device: one allocation, the velocities then the per-level arrays.
struct AdvecDeviceFields {
    double* data = nullptr;
    AdvecFields view{};
};

// Copies the host fields to the device; true on a CUDA error.
inline bool advec_upload(const AdvecProblem& p, const AdvecHostFields& h, AdvecDeviceFields& d) {
    const size_t n = p.cells(), nk = p.kcells();
    if (cudaCheck(cudaMalloc(&d.data, (3 * n + 3 * nk) * sizeof(double)))) return true;
    double* at = d.data;
    for (const std::vector<double>* field : {&h.u, &h.v, &h.w, &h.rho, &h.rhoh, &h.dzi}) {
        if (cudaCheck(cudaMemcpy(at, field->data(), field->size() * sizeof(double), cudaMemcpyHostToDevice)))
            return true;
        at += field->size();
    }
    d.view = AdvecFields{d.data, d.data + n, d.data + 2 * n, d.data + 3 * n, d.data + 3 * n + nk,
                         d.data + 3 * n + 2 * nk, h.dxi, h.dyi};
    return false;
}

// Whether a cell's tendency matches the reference's: both NaN (a ghost cell neither wrote), or
// within ADVEC_TOLERANCE of 1 + |reference|.
__host__ __device__ inline bool advec_matches(double out, double ref) {
    return (out != out && ref != ref) || fabs(out - ref) <= ADVEC_TOLERANCE * (1.0 + fabs(ref));
}
