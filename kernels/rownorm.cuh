// rownorm.cuh: device helpers shared by the layernorm families (layernorm.cuh,
// residual_layernorm.cuh). No launch sizes and no launchers live here, so
// including it ties no family's object to another family's macros.
//
// A block normalizes one row of C floats that it first stages in shared memory,
// so the row is read from global memory once; mean and variance are two-pass
// (as torch computes them), which matters for rows with a large mean.
#pragma once
#include "common.cuh"

// Loads row element i (scalar) or the i-th float4 (VEC) of `src` into `row`,
// optionally adding `add` (and `add_bias`) element-wise; returns the thread's
// partial sum of what it stored. Thread t handles elements t, t+BLOCK, ...
template <int BLOCK, bool VEC>
__device__ __forceinline__ float rownorm_stage(float* row, const float* src, const float* add, const float* add_bias, int C) {
    float s = 0.0f;
    if constexpr (VEC) {
        float4* row4 = reinterpret_cast<float4*>(row);
        for (int i = threadIdx.x; i < C / 4; i += BLOCK) {
            float4 v = reinterpret_cast<const float4*>(src)[i];
            if (add) {
                const float4 a = reinterpret_cast<const float4*>(add)[i];
                v.x += a.x; v.y += a.y; v.z += a.z; v.w += a.w;
            }
            if (add_bias) {
                const float4 a = reinterpret_cast<const float4*>(add_bias)[i];
                v.x += a.x; v.y += a.y; v.z += a.z; v.w += a.w;
            }
            row4[i] = v;
            s += (v.x + v.y) + (v.z + v.w);
        }
    } else {
        for (int i = threadIdx.x; i < C; i += BLOCK) {
            float v = src[i];
            if (add) v += add[i];
            if (add_bias) v += add_bias[i];
            row[i] = v;
            s += v;
        }
    }
    return s;
}

// Normalizes the staged row into `out` (weight, bias per channel) and, when
// `copy` is given, also writes the staged row there (the fused residual output).
// Every thread revisits only the elements it staged, so no barrier is needed
// between staging and here beyond those inside the reductions.
template <int BLOCK, bool VEC>
__device__ __forceinline__ void rownorm_finish(float* out, float* copy, const float* row, float partial_sum,
                                               const float* weight, const float* bias, int C, float eps, float* scratch) {
    const float mean = block_sum<BLOCK>(partial_sum, scratch) / C;
    float ss = 0.0f;
    if constexpr (VEC) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int i = threadIdx.x; i < C / 4; i += BLOCK) {
            const float4 v = row4[i];
            const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
            ss += (a * a + b * b) + (c * c + d * d);
        }
    } else {
        for (int i = threadIdx.x; i < C; i += BLOCK) {
            const float d = row[i] - mean;
            ss += d * d;
        }
    }
    const float rstd = rsqrtf(block_sum<BLOCK>(ss, scratch) / C + eps);
    if constexpr (VEC) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int i = threadIdx.x; i < C / 4; i += BLOCK) {
            const float4 v = row4[i];
            const float4 w = reinterpret_cast<const float4*>(weight)[i];
            const float4 b = reinterpret_cast<const float4*>(bias)[i];
            reinterpret_cast<float4*>(out)[i] = make_float4((v.x - mean) * rstd * w.x + b.x, (v.y - mean) * rstd * w.y + b.y,
                                                            (v.z - mean) * rstd * w.z + b.z, (v.w - mean) * rstd * w.w + b.w);
            if (copy) reinterpret_cast<float4*>(copy)[i] = v;
        }
    } else {
        for (int i = threadIdx.x; i < C; i += BLOCK) {
            const float v = row[i];
            out[i] = (v - mean) * rstd * weight[i] + bias[i];
            if (copy) copy[i] = v;
        }
    }
}

// Shared memory a row-normalizing block needs, in bytes; rows past the default
// 48 KB (C > 12288) would need an opt-in that no GPT-2 shape requires.
inline size_t rownorm_smem_bytes(int C) { return (size_t)C * sizeof(float); }
inline bool rownorm_fits(int C, const char* who) {
    if (rownorm_smem_bytes(C) <= 48 * 1024) return true;
    fprintf(stderr, "%s: C=%d needs %zu bytes of shared memory per row, over the 48 KB default\n", who, C,
            rownorm_smem_bytes(C));
    return false;
}
