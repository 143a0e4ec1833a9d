// brute_force.cuh: every configuration of a list measured in one process, for
// bench/brute_force.py (which generates the list, compiles it in chunks and
// writes the answers as a Kernel Tuner cache; bench/brute_force_harness.cuh
// holds what the examples share: the launch, check and timing of one
// configuration, the arguments and the output lines).
//
// A sweep builds and runs one program per configuration; for ground truth over
// 15,364 configurations that costs a CUDA context and a link per point. Here
// each chunk of the list instantiates its kernels from xgemm.cuh's template
// (the same kernel a sweep's conf.cuh instantiates), and one process checks
// and times them all, on the same inputs, one after another. The check: C is
// cleared, the kernel runs once, and every element is compared with the
// reference kernel's result on the GPU (atol + |ref| * rtol, as xgemm.cu
// checks).
#pragma once

#include "xgemm.cuh"

#include <vector>

struct BruteForceBench {
    int S = 2048;
    float *dA = nullptr, *dB = nullptr, *dC = nullptr, *dRef = nullptr;
    unsigned* dBad = nullptr;
    cudaEvent_t start, stop;
};

#include "brute_force_harness.cuh"

// Whether element i of C is within atol + |ref| * rtol of the reference's (NaN never is).
struct XgemmElementMatches {
    const float *c, *ref;
    float atol, rtol;
    __device__ bool operator()(size_t i) const { return fabsf(c[i] - ref[i]) <= atol + fabsf(ref[i]) * rtol; }
};

template <int MWG, int NWG, int KWG, int MDIMC, int NDIMC, int MDIMA, int NDIMB, int VWM, int VWN, int SA, int SB>
BruteForceResult brute_force_one(BruteForceBench& b) {
    const int S = b.S;
    const size_t n = size_t(S) * S;
    cudaMemset(b.dC, 0, n * 4);
    return brute_force_measure(
        b.start, b.stop,
        [&]() { return xgemm_launch<MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB, VWM, VWN, SA, SB>(S, S, S, b.dA, b.dB, b.dC); },
        [&]() {
            const float atol = 1e-4f * sqrtf(float(S)), rtol = 1e-4f;
            return brute_force_all_match(n, XgemmElementMatches{b.dC, b.dRef, atol, rtol}, b.dBad);
        });
}
