// inputs.cuh: the deterministic inputs dedisp.cu and the brute-force harness share.
#pragma once

#include "dedisp.cuh"

#include <cmath>
#include <cstdint>
#include <vector>

// Filterbank samples: bytes from a linear congruential sequence, the same every run.
inline std::vector<uint8_t> dedisp_input(const DedispProblem& p) {
    std::vector<uint8_t> in(size_t(p.channels) * p.row());
    uint32_t seed = 12345u;
    for (uint8_t& x : in) {
        seed = seed * 1664525u + 1013904223u;
        x = uint8_t(seed >> 24);
    }
    return in;
}

// Each channel's delay in samples per trial-DM step: the cold-plasma dispersion
// law, 4148.808 s MHz^2 * DM * (f^-2 - f_top^-2), for channels of 0.1953125 MHz
// from 1425 MHz, 40.96 us samples and a DM step of 0.02 pc/cm^3 (the community
// space's observation). The lowest channel is delayed most. Returns an empty
// vector when the largest shift would not fit the input row's slack.
inline std::vector<float> dedisp_delays(const DedispProblem& p) {
    const double f0 = 1425.0, df = 0.1953125, t_sample = 40.96e-6, dm_step = 0.02;
    const double f_top = f0 + (p.channels - 1) * df;
    std::vector<float> delay(p.channels);
    for (int c = 0; c < p.channels; ++c) {
        double f = f0 + c * df;
        delay[c] = float(4148.808 * (1.0 / (f * f) - 1.0 / (f_top * f_top)) / t_sample * dm_step);
    }
    if (double(p.dms - 1) * delay[0] + 1 >= p.max_shift) return {};
    return delay;
}
