// encoder.cuh: token + position embedding.
//
//   out[b, t, c] = wte[tokens[b, t], c] + wpe[start + t, c]
//
// Version 1 (the only one): a 3-D block (x over channels, y over positions, z over
// the batch), as in seed 004, whose sweep found a 5x5x5 block fastest on an A40.
// A thread moves 4 channels with float4 accesses when C % 4 == 0.
// The block shape decides coalescing (x) against reuse of a token's row across
// threads (y, z), which is why it is worth sweeping rather than fixing.
// `start` comes from device memory when decoding (so a captured CUDA graph can
// replay the step at a growing position), else it is 0. A decoding step embeds
// one token a sequence (T = 1), with the same macros: only x (and z, over the
// batch) has work then, so its best shape is found by sweeping the decoding
// program (gpt2_generate), not the forward pass.
#pragma once
#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef ENCODER_BLOCK_X
#define ENCODER_BLOCK_X 32
#endif
#ifndef ENCODER_BLOCK_Y
#define ENCODER_BLOCK_Y 4
#endif
#ifndef ENCODER_BLOCK_Z
#define ENCODER_BLOCK_Z 1
#endif
static_assert(ENCODER_BLOCK_X >= 1 && ENCODER_BLOCK_Y >= 1 && ENCODER_BLOCK_Z >= 1,
              "ENCODER_BLOCK_X/Y/Z must each be >= 1");
static_assert(ENCODER_BLOCK_Z <= 64, "ENCODER_BLOCK_Z must be <= 64 (CUDA's limit for blockDim.z)");
static_assert(ENCODER_BLOCK_X * ENCODER_BLOCK_Y * ENCODER_BLOCK_Z <= 1024,
              "ENCODER_BLOCK_X * ENCODER_BLOCK_Y * ENCODER_BLOCK_Z must be <= 1024 threads per block");

// ---- kernel ---------------------------------------------------------------
// VEC: each thread moves 4 consecutive channels (C % 4 == 0, aligned rows), so x
// counts float4 columns; the block shape keeps its meaning (x along channels).
template <bool VEC>
__global__ void encoder_kernel(float* __restrict__ out, const int* __restrict__ tokens, const float* __restrict__ wte,
                               const float* __restrict__ wpe, const int* __restrict__ start_pos, int B, int T, int C) {
    grid_dependency_sync();  // the decoding step launches it as a dependent (common.cuh)
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int t = blockIdx.y * blockDim.y + threadIdx.y;
    const int b = blockIdx.z * blockDim.z + threadIdx.z;
    const int width = VEC ? C / 4 : C;
    if (c >= width || t >= T || b >= B) return;
    const int start = start_pos ? *start_pos : 0;
    const size_t bt = (size_t)b * T + t;
    if constexpr (VEC) {
        const float4 x = reinterpret_cast<const float4*>(wte + (size_t)tokens[bt] * C)[c];
        const float4 p = reinterpret_cast<const float4*>(wpe + (size_t)(start + t) * C)[c];
        reinterpret_cast<float4*>(out + bt * C)[c] = make_float4(x.x + p.x, x.y + p.y, x.z + p.z, x.w + p.w);
    } else {
        out[bt * C + c] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)(start + t) * C + c];
    }
}

// ---- launcher -------------------------------------------------------------
inline int encoder_launch(dim3 block, float* out, const int* tokens, const float* wte, const float* wpe,
                          const int* start_pos, int B, int T, int C, cudaStream_t stream) {
    const bool vec = C % 4 == 0 && aligned16(out, wte, wpe);
    const dim3 grid(CEIL_DIV(vec ? C / 4 : C, (int)block.x), CEIL_DIV(T, (int)block.y), CEIL_DIV(B, (int)block.z));
    if (vec) return engine_launch("encoder", "encoder_kernel", encoder_kernel<true>, grid, block, 0, stream, out, tokens, wte, wpe, start_pos, B, T, C);
    return engine_launch("encoder", "encoder_kernel", encoder_kernel<false>, grid, block, 0, stream, out, tokens, wte, wpe, start_pos, B, T, C);
}

int encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, const int* start_pos, int B,
                    int T, int C, cudaStream_t stream) {
    return encoder_launch(dim3(ENCODER_BLOCK_X, ENCODER_BLOCK_Y, ENCODER_BLOCK_Z), out, tokens, wte, wpe, start_pos, B, T, C, stream);
}
