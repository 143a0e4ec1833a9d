// __launch_bounds__(1024) leaves 64 registers per thread; the function it calls,
// compiled on its own (-rdc), needs more: nvlink refuses the call.
extern __device__ float dot64(const float* in);
__global__ void __launch_bounds__(1024) bounded(float* out, const float* in) { out[threadIdx.x] = dot64(in + threadIdx.x); }
int main() { return 0; }
