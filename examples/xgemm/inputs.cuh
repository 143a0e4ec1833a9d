// inputs.cuh: the deterministic inputs xgemm.cu and the brute-force harness share.
#pragma once

#include <cstdint>
#include <vector>

// Values in [-1, 1) from a linear congruential sequence: the same matrices every run.
inline void fill(std::vector<float>& v, uint32_t seed) {
    for (float& x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = float(seed >> 8) / float(1u << 23) - 1.0f;
    }
}
