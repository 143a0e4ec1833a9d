// gelu.cuh: GPT-2's activation, out = gelu_tanh(inp) (in place allowed).
//
// Version 1 (the only one): one float4 per thread when aligned, else one float.
// tanhf keeps it within float rounding of transformers' "gelu_new"; the kernel is
// bandwidth-bound all the same (8 bytes per element against ~10 flops and a
// tanh), so the block size is again about bytes in flight (seed 004: 128).
#pragma once
#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef GELU_BLOCK_SIZE
#define GELU_BLOCK_SIZE 128
#endif
static_assert(GELU_BLOCK_SIZE >= 1 && GELU_BLOCK_SIZE <= 1024,
              "GELU_BLOCK_SIZE must be between 1 and 1024 threads per block");

// ---- kernel ---------------------------------------------------------------
template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK) gelu_kernel(float* out, const float* inp, int N) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if constexpr (VEC) {
        const long long n4 = N / 4;
        if (i < n4) {
            const float4 x = reinterpret_cast<const float4*>(inp)[i];
            reinterpret_cast<float4*>(out)[i] = make_float4(gelu_tanh(x.x), gelu_tanh(x.y), gelu_tanh(x.z), gelu_tanh(x.w));
        } else if (i == n4) {
            for (long long j = 4 * n4; j < N; ++j) out[j] = gelu_tanh(inp[j]);
        }
    } else {
        if (i < N) out[i] = gelu_tanh(inp[i]);
    }
}

// ---- launcher -------------------------------------------------------------
template <int BLOCK>
int gelu_forward_sized(float* out, const float* inp, int N, cudaStream_t stream) {
    const bool vec = aligned16(out, inp);
    const dim3 grid = elementwise_grid(N, BLOCK, vec);
    if (vec) return engine_launch("gelu", "gelu_kernel", gelu_kernel<BLOCK, true>, grid, dim3(BLOCK), 0, stream, out, inp, N);
    return engine_launch("gelu", "gelu_kernel", gelu_kernel<BLOCK, false>, grid, dim3(BLOCK), 0, stream, out, inp, N);
}

int gelu_forward(float* out, const float* inp, int N, cudaStream_t stream) {
    return gelu_forward_sized<GELU_BLOCK_SIZE>(out, inp, N, stream);
}
