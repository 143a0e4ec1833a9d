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

// Whether point i's answer is the reference's, or either answer where the reference is not sure of it.
struct PnpolyAnswerMatches {
    const int *out, *ref, *ambiguous;
    __device__ bool operator()(size_t i) const {
        return out[i] == ref[i] || (ambiguous[i] && (out[i] == 0 || out[i] == 1));
    }
};

template <int B, int T, int BETWEEN, int SLOPES, int METHOD>
BruteForceResult brute_force_one(BruteForceBench& b) {
    const int n = b.p.points;
    cudaMemset(b.dOut, 0xff, size_t(n) * 4);
    return brute_force_measure(
        b.start, b.stop, [&]() { return pnpoly_launch<B, T, BETWEEN, SLOPES, METHOD>(b.poly, b.p, b.dPoints, b.dOut); },
        [&]() { return brute_force_all_match(n, PnpolyAnswerMatches{b.dOut, b.dRef, b.dAmb}, b.dBad); });
}
