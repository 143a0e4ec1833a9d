// Host-only: prints the split-K count matmul_split_k_for picks for a device
// described by its attributes and a product's shape (no GPU needed, no CUDA call).
//   split_k_picks SMS CLOCK_KHZ MEM_CLOCK_KHZ BUS_BITS CC_MAJOR CC_MINOR BM BN BK M N K
#include <cstdio>
#include <cstdlib>

#include "matmul.cuh"

int main(int argc, char** argv) {
    if (argc != 13) {
        fprintf(stderr, "usage: split_k_picks SMS CLOCK_KHZ MEM_CLOCK_KHZ BUS_BITS CC_MAJOR CC_MINOR BM BN BK M N K\n");
        return 2;
    }
    long long v[12];
    for (int i = 0; i < 12; ++i) v[i] = atoll(argv[i + 1]);
    const MatmulDeviceRates r = MatmulDeviceRates::from((int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], (int)v[5]);
    const int BM = (int)v[6], BN = (int)v[7], BK = (int)v[8];
    const long long M = v[9], N = v[10];
    const long long tiles = CEIL_DIV(M, (long long)BM) * CEIL_DIV(N, (long long)BN);
    printf("%d\n", matmul_split_k_for(r, tiles, BM, BN, BK, M, N, (int)v[11]));
    return 0;
}
