// Host-only: the decoding step's two shape rules in kernels/matvec.cuh (no GPU needed,
// no CUDA call), for M rows of C channels in `heads` heads and a cache of maxT positions:
//   decode_policy M C HEADS MAXT  ->  "ATTENDS WARP_NORM" (0 or 1 each)
// ATTENDS: matvec_decode_attends, the attention folded into the qkv matvec;
// WARP_NORM: matvec_warp_norm at one warp a column, each warp LayerNorming the row.
#include <cstdio>
#include <cstdlib>

#include "matvec.cuh"

int main(int argc, char** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: decode_policy M C HEADS MAXT\n");
        return 2;
    }
    const int M = atoi(argv[1]), C = atoi(argv[2]), heads = atoi(argv[3]), maxT = atoi(argv[4]);
    printf("%d %d\n", matvec_decode_attends(M, C, heads, maxT) ? 1 : 0, matvec_warp_norm(M, C, 1) ? 1 : 0);
    return 0;
}
