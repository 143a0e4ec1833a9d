// softmax.cuh: causal row softmax of the plain (reference) attention path,
//
//   att[bh, t1, t2] = exp(preatt[bh, t1, t2] - max) / sum     for t2 <= t1, else 0
//
// over B*NH*T rows of T scores (preatt comes scaled from attention_qk_kernel).
// Version 1 (the only one): one block per row, max and sum by block reductions,
// expf for accuracy. Only the reference attention path uses it; the flash
// kernel keeps its softmax online, in registers.
#pragma once
#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef SOFTMAX_BLOCK_SIZE
#define SOFTMAX_BLOCK_SIZE 256
#endif
static_assert(ENGINE_REDUCTION_BLOCK_OK(SOFTMAX_BLOCK_SIZE),
              "SOFTMAX_BLOCK_SIZE must be a power of two up to 32 or a multiple of 32 up to 1024 (it reduces with warp shuffles)");

// ---- kernel ---------------------------------------------------------------
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) softmax_kernel(float* __restrict__ att, const float* __restrict__ preatt, int T) {
    __shared__ float scratch[32];
    const size_t row = blockIdx.x;
    const int t1 = (int)(row % T);
    const float* x = preatt + row * T;
    float* y = att + row * T;
    float m = -INFINITY;
    for (int t = threadIdx.x; t <= t1; t += BLOCK) m = fmaxf(m, x[t]);
    m = block_max<BLOCK>(m, scratch);
    float s = 0.0f;
    for (int t = threadIdx.x; t <= t1; t += BLOCK) s += expf(x[t] - m);
    const float inv = 1.0f / block_sum<BLOCK>(s, scratch);
    for (int t = threadIdx.x; t < T; t += BLOCK) y[t] = t <= t1 ? expf(x[t] - m) * inv : 0.0f;
}

// ---- launcher -------------------------------------------------------------
template <int BLOCK>
int softmax_forward_sized(float* att, const float* preatt, int rows, int T, cudaStream_t stream) {
    return engine_launch("softmax", "softmax_kernel", softmax_kernel<BLOCK>, dim3(rows), dim3(BLOCK), 0, stream, att, preatt, T);
}

int softmax_forward(float* att, const float* preatt, int rows, int T, cudaStream_t stream) {
    return softmax_forward_sized<SOFTMAX_BLOCK_SIZE>(att, preatt, rows, T, stream);
}
