// brute_force.cuh: every configuration of a list measured in one process, for
// bench/brute_force.py (which generates the list from space.yaml, compiles it
// in chunks and writes the answers as a Kernel Tuner cache;
// bench/brute_force_harness.cuh holds what the examples share: the launch,
// check and timing of one configuration, the arguments and the output lines).
//
// Each chunk of the list instantiates its kernels from advec.cuh's template
// (the same kernel a sweep's conf.cuh instantiates), and one process checks
// and times them all, on the same inputs, one after another. The check: the
// output is poisoned (NaN), the kernel runs once, and every cell, ghosts
// included, is compared with the reference kernel's (advec_matches).
#pragma once

#include "inputs.cuh"

struct BruteForceBench {
    AdvecProblem p;
    AdvecFields f{};
    double *dOut = nullptr, *dRef = nullptr;
    unsigned* dBad = nullptr;
    cudaEvent_t start, stop;
};

#include "brute_force_harness.cuh"

// Whether cell c matches the reference's.
struct AdvecCellMatches {
    const double *out, *ref;
    __device__ bool operator()(size_t c) const { return advec_matches(out[c], ref[c]); }
};

template <int BX, int BY, int BZ, int TX, int TY, int TZ, int ST, int MB>
BruteForceResult brute_force_one(BruteForceBench& b) {
    const size_t n = b.p.cells();
    cudaMemset(b.dOut, 0xff, n * sizeof(double));
    return brute_force_measure(
        b.start, b.stop, [&]() { return advec_launch<BX, BY, BZ, TX, TY, TZ, ST, MB>(b.p, b.f, b.dOut); },
        [&]() { return brute_force_all_match(n, AdvecCellMatches{b.dOut, b.dRef}, b.dBad); });
}
