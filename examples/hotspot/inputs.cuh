// inputs.cuh: the deterministic inputs hotspot.cu and the brute-force harness share.
#pragma once

#include "hotspot.cuh"

#include <cstdint>
#include <vector>

// A number in [0, 1) from a linear congruential sequence, the same every run.
inline float hotspot_uniform(uint32_t& seed) {
    seed = seed * 1664525u + 1013904223u;
    return float(seed >> 8) * (1.0f / 16777216.0f);
}

// Temperatures of 320-340 K, and a power map that is low everywhere but in a few
// hot rectangles (the cores of a chip), so heat flows across tile boundaries.
inline void hotspot_inputs(const HotspotProblem& p, std::vector<float>& temp, std::vector<float>& power) {
    const size_t n = size_t(p.width) * p.height;
    temp.resize(n);
    power.resize(n);
    uint32_t seed = 7u;
    for (size_t i = 0; i < n; ++i) {
        temp[i] = 320.0f + 20.0f * hotspot_uniform(seed);
        power[i] = 0.05f * hotspot_uniform(seed);
    }
    for (int core = 0; core < 16; ++core) {
        const int x0 = int(hotspot_uniform(seed) * p.width * 0.8f), y0 = int(hotspot_uniform(seed) * p.height * 0.8f);
        for (int y = y0; y < y0 + p.height / 10; ++y)
            for (int x = x0; x < x0 + p.width / 10; ++x) power[size_t(y) * p.width + x] += 2.0f;
    }
}
