__device__ float dot64(const float* in) {
    float a[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) a[i] = in[i * 33];
    float s = 0;
#pragma unroll
    for (int r = 0; r < 64; ++r)
#pragma unroll
        for (int i = 0; i < 64; ++i) s += a[i] * a[(i + r) & 63];
    return s;
}
