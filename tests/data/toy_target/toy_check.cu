// Exit 0 when "results" are right; ALPHA_BLOCK == 96 is the planted wrong one.
#include "common.h"
#include <cstdio>
int main() {
    if (!toy_results_right()) return 1;
    printf("PASS\n");
    return 0;
}
