// brute_force.cuh: every configuration of a list measured in one process, for
// bench/brute_force.py (which generates the list from space.yaml, compiles it
// in chunks and writes the answers as a Kernel Tuner cache;
// bench/brute_force_harness.cuh holds what the examples share: the launch,
// check and timing of one configuration, the arguments and the output lines).
//
// Each chunk of the list instantiates its kernels from dedisp.cuh's template
// (the same kernel a sweep's conf.cuh instantiates), and one process checks
// and times them all, on the same inputs, one after another. The check: out is
// cleared, the kernel runs once, and every output is compared with the
// reference kernel's for equality (the sums are exact).
#pragma once

#include "dedisp.cuh"

#include <vector>

struct BruteForceBench {
    DedispProblem p;
    uint8_t* dIn = nullptr;
    float *dDelay = nullptr, *dOut = nullptr, *dRef = nullptr;
    unsigned* dBad = nullptr;
    cudaEvent_t start, stop;
};

#include "brute_force_harness.cuh"

// Whether output i equals the reference's (NaN never does): the sums are exact in fp32.
struct DedispOutputMatches {
    const float *out, *ref;
    __device__ bool operator()(size_t i) const { return out[i] == ref[i]; }
};

template <int BX, int BY, int TX, int TY, int SX, int SY>
BruteForceResult brute_force_one(BruteForceBench& b) {
    const size_t n = size_t(b.p.samples) * b.p.dms;
    cudaMemset(b.dOut, 0, n * 4);
    return brute_force_measure(
        b.start, b.stop, [&]() { return dedisp_launch<BX, BY, TX, TY, SX, SY>(b.p, b.dIn, b.dDelay, b.dOut); },
        [&]() { return brute_force_all_match(n, DedispOutputMatches{b.dOut, b.dRef}, b.dBad); });
}
