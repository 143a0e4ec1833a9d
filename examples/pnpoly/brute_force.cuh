// brute_force.cuh: every configuration of a list measured in one process, for
// bench/brute_force.py (which generates the list from space.yaml, compiles it
// in chunks and writes the answers as a Kernel Tuner cache;
// bench/brute_force_harness.cuh holds what the examples share: the launch,
// check and timing of one configuration, the arguments and the output lines).
//
// Each chunk of the list instantiates its kernels from pnpoly.cuh's template
// (the same kernel a sweep's conf.cuh instantiates), and one process checks
// and times them all, on the same inputs, one after another. The check: the
// output is cleared, the kernel runs once, and every point's answer is
// compared with the reference kernel's, except those the reference flags as
// too close to an edge for float to decide.
#pragma once

#include "pnpoly.cuh"

struct BruteForceBench {
    PnpolyPolygon poly;
    PnpolyProblem p;
    float2* dPoints = nullptr;
    int *dOut = nullptr, *dRef = nullptr, *dAmb = nullptr;
    unsigned* dBad = nullptr;
    cudaEvent_t start, stop;
};

#include "brute_force_harness.cuh"

using BruteForceEntry = BruteForceEntryOf<BruteForceBench>;

// Counts the answers that differ from the reference where it is sure of them.
static __global__ void pnpoly_count_mismatches(const int* out, const int* ref, const int* ambiguous, int n,
                                               unsigned* bad) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && out[i] != ref[i] && !(ambiguous[i] && (out[i] == 0 || out[i] == 1))) atomicAdd(bad, 1u);
}

template <int B, int T, int BETWEEN, int SLOPES, int METHOD>
BruteForceResult brute_force_one(BruteForceBench& b) {
    const int n = b.p.points;
    cudaMemset(b.dOut, 0xff, size_t(n) * 4);
    return brute_force_measure(
        b.start, b.stop, [&]() { return pnpoly_launch<B, T, BETWEEN, SLOPES, METHOD>(b.poly, b.p, b.dPoints, b.dOut); },
        [&]() {
            unsigned bad = 0;
            cudaMemset(b.dBad, 0, sizeof(unsigned));
            pnpoly_count_mismatches<<<CEIL_DIV(n, 256), 256>>>(b.dOut, b.dRef, b.dAmb, n, b.dBad);
            cudaMemcpy(&bad, b.dBad, sizeof(unsigned), cudaMemcpyDeviceToHost);
            return bad == 0;
        });
}
