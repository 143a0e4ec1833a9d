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

using BruteForceEntry = BruteForceEntryOf<BruteForceBench>;

// Counts the cells that differ from the reference by more than the tolerance (or are NaN).
static __global__ void hotspot_count_mismatches(const float* out, const float* ref, size_t n, float tolerance,
                                                unsigned* bad) {
    size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n && !(fabsf(out[i] - ref[i]) <= tolerance)) atomicAdd(bad, 1u);
}

template <int BX, int BY, int TX, int TY, int TT, int U, int SH>
BruteForceResult brute_force_one(BruteForceBench& b) {
    const size_t n = size_t(b.p.width) * b.p.height;
    cudaMemcpy(b.dA, b.dInit, n * 4, cudaMemcpyDeviceToDevice);
    cudaMemset(b.dB, 0xff, n * 4);
    return brute_force_measure(
        b.start, b.stop, [&]() { return hotspot_launch<BX, BY, TX, TY, TT, U, SH>(b.p, b.c, b.dPower, b.dA, b.dB); },
        [&]() {
            unsigned bad = 0;
            cudaMemset(b.dBad, 0, sizeof(unsigned));
            hotspot_count_mismatches<<<CEIL_DIV(n, 256), 256>>>(hotspot_result(HOTSPOT_STEPS / TT, b.dA, b.dB), b.dRef,
                                                                 n, HOTSPOT_TOLERANCE, b.dBad);
            cudaMemcpy(&bad, b.dBad, sizeof(unsigned), cudaMemcpyDeviceToHost);
            return bad == 0;
        });
}
