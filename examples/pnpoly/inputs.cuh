// inputs.cuh: the deterministic inputs pnpoly.cu and the brute-force harness share.
#pragma once

#include "pnpoly.cuh"

#include <cmath>
#include <cstdint>
#include <vector>

// A number in [0, 1) from a linear congruential sequence, the same every run.
inline float pnpoly_uniform(uint32_t& seed) {
    seed = seed * 1664525u + 1013904223u;
    return float(seed >> 8) * (1.0f / 16777216.0f);
}

// A star-shaped polygon around (0.5, 0.5): vertex i at angle 2*pi*i/V and a
// radius drawn from 0.25-0.45, so its edges take every direction and its
// boundary is jagged (about two in five points of the unit square inside);
// each edge's slope as the kernels divide it (IEEE float division, as the
// device's default -prec-div does), so precomputed and divided slopes agree.
inline PnpolyPolygon pnpoly_polygon() {
    PnpolyPolygon poly;
    uint32_t seed = 2024u;
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < PNPOLY_VERTICES; ++i) {
        double angle = 2.0 * pi * i / PNPOLY_VERTICES, r = 0.25 + 0.2 * pnpoly_uniform(seed);
        poly.v[i] = make_float2(float(0.5 + r * cos(angle)), float(0.5 + r * sin(angle)));
    }
    for (int j = 0, k = PNPOLY_VERTICES - 1; j < PNPOLY_VERTICES; k = j++)
        poly.slope[j] = (poly.v[k].x - poly.v[j].x) / (poly.v[k].y - poly.v[j].y);
    return poly;
}

// Points spread uniformly over the unit square.
inline std::vector<float2> pnpoly_points(const PnpolyProblem& p) {
    std::vector<float2> points(p.points);
    uint32_t seed = 12345u;
    for (float2& q : points) {
        float x = pnpoly_uniform(seed);
        q = make_float2(x, pnpoly_uniform(seed));
    }
    return points;
}

// A point closer than this (along x, scaled by the edge's slope) to an edge it
// crosses may be called either way by a float computation: the check leaves it
// out, as it does a point at a vertex's exact height (pnpoly_reference_kernel).
constexpr double PNPOLY_MARGIN = 1e-5;
