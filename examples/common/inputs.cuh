// inputs.cuh: the examples' deterministic inputs (a linear congruential sequence), so a
// program's check and its timed runs see the same values on every run and every GPU.
#pragma once

#include <cstdint>
#include <vector>

// Values in [-scale, scale), from `seed`.
inline void fill(std::vector<float>& v, uint32_t seed, float scale = 1.0f) {
    for (float& x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = scale * (float(seed >> 8) / float(1u << 23) - 1.0f);
    }
}
