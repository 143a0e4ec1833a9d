// brute_force.cuh: every configuration of a list measured in one process, for
// bench/brute_force.py (which generates the list from space.yaml, compiles it
// in chunks and writes the answers as a Kernel Tuner cache;
// bench/brute_force_harness.cuh holds what the examples share: the launch,
// check and timing of one configuration, the arguments and the output lines).
//
// Each chunk of the list instantiates its kernels from hotspot.cuh's template
// (the same kernel a sweep's conf.cuh instantiates), and one process checks
// and times them all, on the same inputs, one after another. The check: the
// run starts from the initial temperatures, the far buffer is poisoned, and
// every cell of the result is compared with the reference kernel's run.
#pragma once

#include "hotspot.cuh"

struct BruteForceBench {
    HotspotProblem p;
    HotspotCoefficients c;
    float *dPower = nullptr, *dInit = nullptr, *dA = nullptr, *dB = nullptr, *dRef = nullptr;
    unsigned* dBad = nullptr;
    cudaEvent_t start, stop;
};

#include "brute_force_harness.cuh"

// Whether cell i is within the tolerance of the reference's (NaN never is).
struct HotspotCellMatches {
    const float *out, *ref;
    float tolerance;
    __device__ bool operator()(size_t i) const { return fabsf(out[i] - ref[i]) <= tolerance; }
};

template <int BX, int BY, int TX, int TY, int TT, int U, int SH>
BruteForceResult brute_force_one(BruteForceBench& b) {
    const size_t n = size_t(b.p.width) * b.p.height;
    cudaMemcpy(b.dA, b.dInit, n * 4, cudaMemcpyDeviceToDevice);
    cudaMemset(b.dB, 0xff, n * 4);
    return brute_force_measure(
        b.start, b.stop, [&]() { return hotspot_launch<BX, BY, TX, TY, TT, U, SH>(b.p, b.c, b.dPower, b.dA, b.dB); },
        [&]() {
            const float* out = hotspot_result(HOTSPOT_STEPS / TT, b.dA, b.dB);
            return brute_force_all_match(n, HotspotCellMatches{out, b.dRef, HOTSPOT_TOLERANCE}, b.dBad);
        });
}
