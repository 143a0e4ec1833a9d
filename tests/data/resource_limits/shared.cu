// 96 KB of static shared memory: over the 48 KB a block may have statically.
__global__ void big_tile(float* out) {
    __shared__ float tile[24576];
    tile[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = tile[(threadIdx.x * 7) % 24576];
}
int main() { return 0; }
