// Where a CUDA process's start-up goes: cuInit, the primary context (cudaFree(0)), a first kernel.
// One line: start time, then init=, ctx=, kern= seconds and the last error (bench/context_startup/run.sh).
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
__global__ void touch(int *p) { p[threadIdx.x] = threadIdx.x; }
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  double t0 = now();
  CUresult r = cuInit(0);
  double t1 = now();
  cudaError_t e = cudaFree(0);
  double t2 = now();
  int *p; cudaMalloc(&p, 1024); touch<<<1, 256>>>(p); e = cudaDeviceSynchronize();
  double t3 = now();
  printf("%.6f init=%.3f ctx=%.3f kern=%.3f %d %s\n", t0, t1 - t0, t2 - t1, t3 - t2, (int)r, cudaGetErrorString(e));
  return e != cudaSuccess;
}
