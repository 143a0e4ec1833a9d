// residual.cuh: the residual connection, out = a + b (out may alias a).
//
// Version 1 (the only one): one float4 per thread when every pointer is 16-byte
// aligned and N is large, else one float per thread; the tail of a float4 pass
// is finished by one extra thread. It moves 12 bytes per element and computes
// one add, so it is bandwidth-bound: the block size decides how many bytes each
// multiprocessor keeps in flight, which is what seed 004's sweep varied
// (128 threads won on its A40).
#pragma once
#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef RESIDUAL_BLOCK_SIZE
#define RESIDUAL_BLOCK_SIZE 128
#endif
static_assert(RESIDUAL_BLOCK_SIZE >= 1 && RESIDUAL_BLOCK_SIZE <= 1024,
              "RESIDUAL_BLOCK_SIZE must be between 1 and 1024 threads per block");

// ---- kernel ---------------------------------------------------------------
template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK) residual_kernel(float* out, const float* a, const float* b, int N) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if constexpr (VEC) {
        const long long n4 = N / 4;
        if (i < n4) {
            const float4 x = reinterpret_cast<const float4*>(a)[i];
            const float4 y = reinterpret_cast<const float4*>(b)[i];
            reinterpret_cast<float4*>(out)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        } else if (i == n4) {
            for (long long j = 4 * n4; j < N; ++j) out[j] = a[j] + b[j];
        }
    } else {
        if (i < N) out[i] = a[i] + b[i];
    }
}

// ---- launcher -------------------------------------------------------------
template <int BLOCK>
int residual_forward_sized(float* out, const float* a, const float* b, int N, cudaStream_t stream) {
    const bool vec = aligned16(out, a, b);
    const dim3 grid = elementwise_grid(N, BLOCK, vec);
    if (vec) return engine_launch("residual", "residual_kernel", residual_kernel<BLOCK, true>, grid, dim3(BLOCK), 0, stream, out, a, b, N);
    return engine_launch("residual", "residual_kernel", residual_kernel<BLOCK, false>, grid, dim3(BLOCK), 0, stream, out, a, b, N);
}

int residual_forward(float* out, const float* a, const float* b, int N, cudaStream_t stream) {
    return residual_forward_sized<RESIDUAL_BLOCK_SIZE>(out, a, b, N, stream);
}
