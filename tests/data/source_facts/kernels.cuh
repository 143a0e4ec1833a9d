// A program written for tests/space/test_source_facts.py: each kernel takes its launch sizes
// from macros by another route, as real programs do.
#pragma once
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#ifndef SUM_THREADS
#define SUM_THREADS 256      // row_sum: threads per block (its body and its launch)
#endif
#ifndef TR_TILE
#define TR_TILE 32           // transpose: tile side (a template argument given to its launcher)
#endif
#ifndef TR_ROWS
#define TR_ROWS 8            // transpose: thread rows (the same)
#endif
#ifndef SCALE_BLOCK
#define SCALE_BLOCK 128      // scale_kernel: handed to a launch helper with the kernel
#endif
#ifndef SCALE_FAST
#define SCALE_FAST 0         // scale_kernel: read only by an #if in a device function it calls
#endif
#ifndef VEC
#define VEC 4                // copy_kernel: through a local dim3 of the launch
#endif
#ifndef UNUSED_LIMIT
#define UNUSED_LIMIT 1       // read by a static_assert alone: no kernel's code
#endif
#define TR_THREADS (TR_TILE * TR_ROWS)
constexpr int BLOCK = SCALE_BLOCK;   // a file-scope constant the kernels' template parameters shadow
#define POW2(n) (((n) & ((n) - 1)) == 0)

static_assert(SUM_THREADS % 32 == 0 && SUM_THREADS <= 1024, "SUM_THREADS: whole warps, at most 1024");
static_assert(TR_THREADS <= 1024 && TR_TILE % TR_ROWS == 0, "TR_ROWS must divide TR_TILE, at most 1024 threads");
static_assert(POW2(VEC) && VEC <= 4, "VEC: 1, 2 or 4 floats per load");
static_assert(sizeof(float) * VEC <= 16, "at most 16 bytes per load");   // sizeof: not translated
static_assert(UNUSED_LIMIT == 0 || UNUSED_LIMIT == 1, "UNUSED_LIMIT is 0 or 1");
constexpr int TR_WARPS = TR_THREADS / 32;     // a constexpr constant: read as a macro would be
static_assert(TR_WARPS >= 1 and TR_WARPS <= 32, "TR_TILE * TR_ROWS threads: 1 to 32 whole warps");

__global__ void row_sum(const float* x, float* y, int n) {
    __shared__ float s[SUM_THREADS];
    s[threadIdx.x] = x[blockIdx.x * n + threadIdx.x];
    y[blockIdx.x] = s[0];
}

template <int TILE, int ROWS>
__global__ void __launch_bounds__(TILE * ROWS) transpose(const float* a, float* b, int n) {
    __shared__ float t[TILE][TILE + 1];
    t[threadIdx.y][threadIdx.x] = a[threadIdx.x];
    b[threadIdx.x] = t[threadIdx.x][threadIdx.y];
}

__device__ float scaled(float v) {
#if SCALE_FAST
    return v * 2.0f;
#else
    return v + v;
#endif
}

__global__ void scale_kernel(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = scaled(x[i]);
}

__global__ void copy_kernel(const float* a, float* b, int n) {
    b[threadIdx.x] = a[threadIdx.x];
}

template <int TILE, int ROWS>
void transpose_launch(const float* a, float* b, int n) {
    transpose<TILE, ROWS><<<dim3(n / TILE, n / TILE), dim3(TILE, ROWS)>>>(a, b, n);
}

template <typename K>
int launch_helper(const char* name, K kernel, dim3 grid, dim3 block, float* x, int n);

void run(float* x, float* y, int n) {
    row_sum<<<n, SUM_THREADS>>>(x, y, n);
    transpose_launch<TR_TILE, TR_ROWS>(x, y, n);
    launch_helper("scale", scale_kernel, dim3(n / SCALE_BLOCK), dim3(SCALE_BLOCK), x, n);
    dim3 block(256 / VEC);
    copy_kernel<<<n / 256, block>>>(x, y, n);
}

template <int BLOCK>
__global__ void blocked_kernel(float* x) { x[threadIdx.x] = BLOCK; }   // BLOCK: a template parameter

template <int BLOCK>
__global__ void fixed_kernel(float* x) { x[threadIdx.x] = BLOCK; }     // the same name, given a literal

void run_blocked(float* x) {
    constexpr int BLOCK = SUM_THREADS;          // a local constant: SUM_THREADS reaches this launch, no other
    static_assert(BLOCK / 32 <= 32 and BLOCK >= 64, "run_blocked: 64 to 1024 threads");
    blocked_kernel<BLOCK><<<1, BLOCK>>>(x);
    fixed_kernel<128><<<1, 128>>>(x);
}

__global__ void chained_kernel(float* x) { x[threadIdx.x] = 0.0f; }

void run_chained(float* x) {
    constexpr int WARPS = SCALE_FAST + 1;     // a local declared from a macro ...
    dim3 block(WARPS * 32);                   // ... and one declared from it: the launch reads SCALE_FAST
    chained_kernel<<<1, block>>>(x);
}
