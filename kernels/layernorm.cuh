// layernorm.cuh: LayerNorm over the last dimension,
//
//   out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias     r < N rows of C
//
// Version 1 (the only one): one block per row, the row staged in shared memory
// (one global read), two block reductions (mean, then variance about the mean).
// The block size trades threads that idle on short rows against fewer waves on
// long ones; seed 004 found 256 best for C=768 on an A40. A decoding step
// launches it only when its rows do not fit the matvec's shared memory (the
// decoding matvec normalizes its input itself, with rownorm.cuh's same steps).
#pragma once
#include "rownorm.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef LAYERNORM_BLOCK_SIZE
#define LAYERNORM_BLOCK_SIZE 256
#endif
static_assert(ENGINE_REDUCTION_BLOCK_OK(LAYERNORM_BLOCK_SIZE),
              "LAYERNORM_BLOCK_SIZE must be a power of two up to 32 or a multiple of 32 up to 1024 (it reduces with warp shuffles)");

// ---- kernel ---------------------------------------------------------------
template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK) layernorm_kernel(float* __restrict__ out, const float* __restrict__ inp,
                                                          const float* __restrict__ weight, const float* __restrict__ bias,
                                                          int C, float eps) {
    extern __shared__ float row[];
    __shared__ float scratch[32];
    grid_dependency_sync();  // a decoding step that cannot fold it launches it as a dependent (common.cuh)
    const size_t r = blockIdx.x;
    const float s = rownorm_stage<BLOCK, VEC>(row, inp + r * C, nullptr, nullptr, C);
    rownorm_finish<BLOCK, VEC>(out + r * C, nullptr, row, s, weight, bias, C, eps, scratch);
}

// ---- launcher -------------------------------------------------------------
template <int BLOCK>
int layernorm_forward_sized(float* out, const float* inp, const float* weight, const float* bias, int N, int C, float eps,
                            cudaStream_t stream) {
    if (!rownorm_fits(C, "layernorm_forward")) return -1;
    const bool vec = C % 4 == 0 && aligned16(out, inp, weight, bias);
    const size_t smem = rownorm_smem_bytes(C);
    if (vec) return engine_launch("layernorm", "layernorm_kernel", layernorm_kernel<BLOCK, true>, dim3(N), dim3(BLOCK), smem, stream, out, inp, weight, bias, C, eps);
    return engine_launch("layernorm", "layernorm_kernel", layernorm_kernel<BLOCK, false>, dim3(N), dim3(BLOCK), smem, stream, out, inp, weight, bias, C, eps);
}

int layernorm_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, float eps,
                      cudaStream_t stream) {
    return layernorm_forward_sized<LAYERNORM_BLOCK_SIZE>(out, inp, weight, bias, N, C, eps, stream);
}
