// residual_layernorm.cuh: the residual add fused with the LayerNorm that follows
// it (seed 002's fused_residual_layernorm), over N rows of C:
//
//   x_out[r, :] = x_in[r, :] + y[r, :] + y_bias          (x_out may alias x_in)
//   ln_out[r, :] = LayerNorm(x_out[r, :]) * weight + bias
//
// Version 1 (the only one): one block per row; the sum is staged in shared
// memory so it is read once, written once to x_out and normalized from there.
// It replaces prepare(bias) + residual + layernorm: three passes over the
// activations become one. y_bias folds the preceding matmul's bias in too.
#pragma once
#include "rownorm.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef RESLN_BLOCK_SIZE
#define RESLN_BLOCK_SIZE 256
#endif
static_assert(ENGINE_REDUCTION_BLOCK_OK(RESLN_BLOCK_SIZE),
              "RESLN_BLOCK_SIZE must be a power of two up to 32 or a multiple of 32 up to 1024 (it reduces with warp shuffles)");

// ---- kernel ---------------------------------------------------------------
template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK) residual_layernorm_kernel(float* x_out, float* __restrict__ ln_out, const float* x_in,
                                                                   const float* __restrict__ y, const float* __restrict__ y_bias,
                                                                   const float* __restrict__ weight,
                                                                   const float* __restrict__ bias, int C, float eps) {
    extern __shared__ float row[];
    __shared__ float scratch[32];
    const size_t r = blockIdx.x;
    const float s = rownorm_stage<BLOCK, VEC>(row, x_in + r * C, y + r * C, y_bias, C);
    rownorm_finish<BLOCK, VEC>(ln_out + r * C, x_out + r * C, row, s, weight, bias, C, eps, scratch);
}

// ---- launcher -------------------------------------------------------------
template <int BLOCK>
int residual_layernorm_forward_sized(float* x_out, float* ln_out, const float* x_in, const float* y, const float* y_bias,
                                     const float* weight, const float* bias, int N, int C, float eps, cudaStream_t stream) {
    if (!rownorm_fits(C, "residual_layernorm_forward")) return -1;
    const bool vec = C % 4 == 0 && aligned16(x_out, ln_out, x_in, y, weight, bias) && (y_bias == nullptr || aligned16(y_bias));
    const size_t smem = rownorm_smem_bytes(C);
    if (vec) return engine_launch("residual_layernorm", "residual_layernorm_kernel", residual_layernorm_kernel<BLOCK, true>, dim3(N), dim3(BLOCK), smem, stream, x_out, ln_out, x_in, y, y_bias, weight, bias, C, eps);
    return engine_launch("residual_layernorm", "residual_layernorm_kernel", residual_layernorm_kernel<BLOCK, false>, dim3(N), dim3(BLOCK), smem, stream, x_out, ln_out, x_in, y, y_bias, weight, bias, C, eps);
}

int residual_layernorm_forward(float* x_out, float* ln_out, const float* x_in, const float* y, const float* y_bias,
                               const float* weight, const float* bias, int N, int C, float eps, cudaStream_t stream) {
    return residual_layernorm_forward_sized<RESLN_BLOCK_SIZE>(x_out, ln_out, x_in, y, y_bias, weight, bias, N, C, eps, stream);
}
