// Holds a CUDA context on its GPU for argv[1] seconds (default 30): bench/context_startup/run.sh
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cuda_runtime.h>
int main(int c, char **v) { cudaFree(0); printf("ready\n"); fflush(stdout); sleep(c > 1 ? atoi(v[1]) : 30); return 0; }
