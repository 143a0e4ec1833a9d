// cuda_check.cuh: the one error check the examples share.
//
// - cudaCheck reports where a CUDA call failed and returns true, so helpers
//   propagate the failure and main decides to exit.
// - CEIL_DIV: blocks to cover a length (grid sizes from the launch sizes).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

inline bool cudaCheckImpl(cudaError_t err, const char* what, const char* file, int line) {
    if (err == cudaSuccess) return false;
    fprintf(stderr, "CUDA error at %s:%d (%s): %s\n", file, line, what, cudaGetErrorString(err));
    return true;
}
#define cudaCheck(call) cudaCheckImpl((call), #call, __FILE__, __LINE__)

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
