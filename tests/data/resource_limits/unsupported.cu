// An instruction sm_90 does not have (only sm_90a): a compile failure, not a resource limit.
__global__ void grow(float* out) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    out[threadIdx.x] = 1.0f;
}
int main() { return 0; }
