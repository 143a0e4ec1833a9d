// Exit 0 when "results" are right; ALPHA_BLOCK == 96 is the planted wrong one.
#include "common.h"
#include <cstdio>
int main() {
    if (ALPHA_BLOCK == 96) {
        fprintf(stderr, "FAIL: max abs error 3.1e-01 > atol 1e-3 (toy: ALPHA_BLOCK=96 computes wrong results)\n");
        return 1;
    }
    printf("PASS\n");
    return 0;
}
