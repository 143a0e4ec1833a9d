// brute_force.cuh: every configuration of a list measured in one process, for
// bench/brute_force.py (which generates the list from space.yaml, compiles it
// in chunks and writes the answers as a Kernel Tuner cache;
// bench/brute_force_harness.cuh holds what the examples share: the launch,
// check and timing of one configuration, the arguments and the output lines).
//
// Each chunk of the list instantiates its kernels from expdist.cuh's template
// (the same kernel a sweep's conf.cuh instantiates), and one process checks
// and times them all, on the same inputs, one after another. The check: the
// partial sums and D are poisoned (NaN), the kernel runs once, and D is
// compared with the reference's within EXPDIST_TOLERANCE.
#pragma once

#include "expdist.cuh"

struct BruteForceBench {
    ExpdistProblem p;
    ExpdistCloud a{}, b{};
    double *dPartial = nullptr, *dResult = nullptr;
    unsigned* dFinished = nullptr;
    long double reference = 0.0L;
    cudaEvent_t start, stop;
};

#include "brute_force_harness.cuh"

template <int BX, int BY, int TX, int TY, int UX, int SH, int COL, int YB>
BruteForceResult brute_force_one(BruteForceBench& b) {
    cudaMemset(b.dPartial, 0xff, expdist_max_blocks(b.p) * sizeof(double));
    cudaMemset(b.dResult, 0xff, sizeof(double));
    cudaMemset(b.dFinished, 0, sizeof(unsigned));
    return brute_force_measure(
        b.start, b.stop,
        [&]() {
            return expdist_launch<BX, BY, TX, TY, UX, SH, COL, YB>(b.p, b.a, b.b, b.dPartial, b.dFinished, b.dResult);
        },
        [&]() {
            double d = NAN;
            cudaMemcpy(&d, b.dResult, sizeof(double), cudaMemcpyDeviceToHost);
            return std::fabs(double((d - b.reference) / b.reference)) <= EXPDIST_TOLERANCE;
        });
}
