// launch_limits: one launch the CUDA runtime refuses for its size, chosen by the
// first argument, reported as programs usually report a CUDA error; for recording
// the runtime's messages and the CUPTI library's `fail` records (capture.sh).
//
//   launch_limits bounds       a __launch_bounds__(256) kernel launched with 512 threads
//   launch_limits registers    a kernel of many registers per thread launched with 1024 threads
//   launch_limits threads      a block of 2048 threads (the limit is 1024)
//   launch_limits block_z      a block of 1 x 1 x 128 threads (z is at most 64)
//   launch_limits grid_y       a grid of 1 x 70000 blocks (y is at most 65535)
//   launch_limits smem         64 KB of dynamic shared memory without opting in (48 KB)
//   launch_limits smem_optin   more dynamic shared memory than a block may have at all
//   launch_limits ok           a launch that is fine
//
// Exit 0 when the launch went through, 1 when the runtime refused it.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#define cudaCheck(call) check((call), #call, __FILE__, __LINE__)
static bool check(cudaError_t err, const char* what, const char* file, int line) {
    if (err == cudaSuccess) return false;
    fprintf(stderr, "CUDA error at %s:%d (%s): %s\n", file, line, what, cudaGetErrorString(err));
    return true;
}

__global__ void __launch_bounds__(256) bounded_kernel(float* out) { out[threadIdx.x] = threadIdx.x; }

// 64 live accumulators and a loop over them: ptxas gives it well over 64 registers a
// thread (no launch bounds to cap it), so 1024 threads need more than 65536.
__global__ void heavy_kernel(float* out, const float* in, int n) {
    float acc[96];
#pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = in[(threadIdx.x + i * 131) % n];
    for (int r = 0; r < n; ++r)
#pragma unroll
        for (int i = 0; i < 96; ++i) acc[i] = acc[i] * acc[(i + 1) % 96] + in[(r + i) % n];
    float s = 0;
#pragma unroll
    for (int i = 0; i < 96; ++i) s += acc[i];
    out[threadIdx.x] = s;
}

__global__ void plain_kernel(float* out) { out[threadIdx.x % 256] = 1.0f; }

__global__ void shared_kernel(float* out) {
    extern __shared__ float tile[];
    tile[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = tile[255 - threadIdx.x];
}

int main(int argc, char** argv) {
    const char* what = argc > 1 ? argv[1] : "ok";
    float *out, *in;
    if (cudaCheck(cudaMalloc(&out, 1 << 20)) || cudaCheck(cudaMalloc(&in, 1 << 20))) return 2;
    if (!strcmp(what, "bounds")) bounded_kernel<<<1, 512>>>(out);
    else if (!strcmp(what, "registers")) heavy_kernel<<<1, 1024>>>(out, in, 1000);
    else if (!strcmp(what, "threads")) plain_kernel<<<1, 2048>>>(out);
    else if (!strcmp(what, "block_z")) plain_kernel<<<1, dim3(1, 1, 128)>>>(out);
    else if (!strcmp(what, "grid_y")) plain_kernel<<<dim3(1, 70000), 32>>>(out);
    else if (!strcmp(what, "smem")) shared_kernel<<<1, 256, 64 * 1024>>>(out);
    else if (!strcmp(what, "smem_optin")) {
        int dev = 0, optin = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        cudaFuncSetAttribute(shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
        shared_kernel<<<1, 256, optin + 1024>>>(out);
    } else plain_kernel<<<1, 256>>>(out);
    if (cudaCheck(cudaGetLastError()) || cudaCheck(cudaDeviceSynchronize())) return 1;
    printf("launch_limits %s: the launch went through\n", what);
    return 0;
}
