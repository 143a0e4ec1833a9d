// Host-only: prints the warps per column matvec_split_for picks for the decoding
// matvec on a device described by its SM count and resident warps per SM (no GPU
// needed, no CUDA call).
//   matvec_split_picks SMS WARPS_PER_SM BLOCK_WARPS N K
#include <cstdio>
#include <cstdlib>

#include "matvec_rules.cuh"

int main(int argc, char** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: matvec_split_picks SMS WARPS_PER_SM BLOCK_WARPS N K\n");
        return 2;
    }
    long long v[5];
    for (int i = 0; i < 5; ++i) v[i] = atoll(argv[i + 1]);
    printf("%d\n", matvec_split_for((int)v[0], (int)v[1], (int)v[2], v[3], (int)v[4]));
    return 0;
}
