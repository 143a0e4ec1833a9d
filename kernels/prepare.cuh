// prepare.cuh: "prepare out", the epilogue that follows a matmul (seed 004's
// prepareOut), over an output of N = rows * OC floats:
//
//   prepare_bias_kernel      out = out + bias[col]
//   prepare_gelu_kernel      out = gelu(out + bias[col])          (fused bias + gelu)
//   prepare_residual_kernel  out = out + bias[col] + residual     (fused bias + residual)
//
// Version 1 (the only one): one float4 per thread when OC % 4 == 0 and every
// pointer is aligned (a float4 then never straddles a row), else one float.
// Fusing the activation or the residual into the bias pass saves a whole read
// and write of the activations and a launch, as seed 004 measured.
#pragma once
#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef PREPARE_BLOCK_SIZE
#define PREPARE_BLOCK_SIZE 256
#endif
static_assert(PREPARE_BLOCK_SIZE >= 1 && PREPARE_BLOCK_SIZE <= 1024,
              "PREPARE_BLOCK_SIZE must be between 1 and 1024 threads per block");

// ---- kernels --------------------------------------------------------------
template <int BLOCK, bool VEC, Epilogue E>
__device__ __forceinline__ void prepare_body(float* out, const float* bias, const float* residual, int N, int OC) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if constexpr (VEC) {
        if (4 * i >= N) return;  // OC % 4 == 0, so N % 4 == 0: no tail
        const int col = (int)((4 * i) % OC);
        float4 v = reinterpret_cast<float4*>(out)[i];
        v.x = epilogue_apply<E>(v.x, bias, col + 0, residual, 4 * i + 0);
        v.y = epilogue_apply<E>(v.y, bias, col + 1, residual, 4 * i + 1);
        v.z = epilogue_apply<E>(v.z, bias, col + 2, residual, 4 * i + 2);
        v.w = epilogue_apply<E>(v.w, bias, col + 3, residual, 4 * i + 3);
        reinterpret_cast<float4*>(out)[i] = v;
    } else {
        if (i >= N) return;
        out[i] = epilogue_apply<E>(out[i], bias, (int)(i % OC), residual, i);
    }
}

template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK) prepare_bias_kernel(float* out, const float* bias, const float* residual, int N, int OC) {
    prepare_body<BLOCK, VEC, Epilogue::Bias>(out, bias, residual, N, OC);
}
template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK) prepare_gelu_kernel(float* out, const float* bias, const float* residual, int N, int OC) {
    prepare_body<BLOCK, VEC, Epilogue::BiasGelu>(out, bias, residual, N, OC);
}
template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK) prepare_residual_kernel(float* out, const float* bias, const float* residual, int N, int OC) {
    prepare_body<BLOCK, VEC, Epilogue::BiasResidual>(out, bias, residual, N, OC);
}

// ---- launcher -------------------------------------------------------------
template <int BLOCK, bool VEC>
int prepare_launch(Epilogue e, float* out, const float* bias, const float* residual, int N, int OC, cudaStream_t stream) {
    const dim3 grid((unsigned)CEIL_DIV((long long)(VEC ? N / 4 : N), (long long)BLOCK));
    switch (e) {
        case Epilogue::Bias:
            return engine_launch("prepare", "prepare_bias_kernel", prepare_bias_kernel<BLOCK, VEC>, grid, dim3(BLOCK), 0, stream, out, bias, residual, N, OC);
        case Epilogue::BiasGelu:
            return engine_launch("prepare", "prepare_gelu_kernel", prepare_gelu_kernel<BLOCK, VEC>, grid, dim3(BLOCK), 0, stream, out, bias, residual, N, OC);
        case Epilogue::BiasResidual:
            return engine_launch("prepare", "prepare_residual_kernel", prepare_residual_kernel<BLOCK, VEC>, grid, dim3(BLOCK), 0, stream, out, bias, residual, N, OC);
        case Epilogue::None:
            return 0;
    }
    return -1;
}

template <int BLOCK>
int prepare_forward_sized(Epilogue e, float* out, const float* bias, const float* residual, int N, int OC, cudaStream_t stream) {
    if (e == Epilogue::BiasResidual && residual == nullptr) {
        fprintf(stderr, "prepare_forward: the bias+residual epilogue needs a residual input\n");
        return -1;
    }
    const bool vec = OC % 4 == 0 && aligned16(out) && (bias == nullptr || aligned16(bias)) &&
                     (residual == nullptr || aligned16(residual));
    return vec ? prepare_launch<BLOCK, true>(e, out, bias, residual, N, OC, stream)
               : prepare_launch<BLOCK, false>(e, out, bias, residual, N, OC, stream);
}

int prepare_forward(Epilogue e, float* out, const float* bias, const float* residual, int N, int OC, cudaStream_t stream) {
    return prepare_forward_sized<PREPARE_BLOCK_SIZE>(e, out, bias, residual, N, OC, stream);
}
