// encoder.cuh: token + position embedding.
//
//   out[b, t, c] = wte[tokens[b, t], c] + wpe[start + t, c]
//
// Version 1 (the only one): a 3-D block (x over channels, y over positions, z over
// the batch), as in seed 004, whose sweep found a 5x5x5 block fastest on an A40.
// The block shape decides coalescing (x) against reuse of a token's row across
// threads (y, z), which is why it is worth sweeping rather than fixing.
// `start` comes from device memory when decoding (so a captured CUDA graph can
// replay the step at a growing position), else it is 0.
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
__global__ void encoder_kernel(float* __restrict__ out, const int* __restrict__ tokens, const float* __restrict__ wte,
                               const float* __restrict__ wpe, const int* __restrict__ start_pos, int B, int T, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int t = blockIdx.y * blockDim.y + threadIdx.y;
    const int b = blockIdx.z * blockDim.z + threadIdx.z;
    if (c >= C || t >= T || b >= B) return;
    const int start = start_pos ? *start_pos : 0;
    const size_t bt = (size_t)b * T + t;
    out[bt * C + c] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)(start + t) * C + c];
}

// ---- launcher -------------------------------------------------------------
int encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, const int* start_pos, int B,
                    int T, int C, cudaStream_t stream) {
    const dim3 block(ENCODER_BLOCK_X, ENCODER_BLOCK_Y, ENCODER_BLOCK_Z);
    const dim3 grid(CEIL_DIV(C, ENCODER_BLOCK_X), CEIL_DIV(T, ENCODER_BLOCK_Y), CEIL_DIV(B, ENCODER_BLOCK_Z));
    return engine_launch("encoder", "encoder_kernel", encoder_kernel, grid, block, 0, stream, out, tokens, wte, wpe,
                         start_pos, B, T, C);
}
