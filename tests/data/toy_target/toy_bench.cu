// Prints engine-timing/1 JSON (to --json FILE, or stdout) for -n iterations;
// with --check, checks its results first as toy_check does (exit 1 before any timing).
#include "common.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>
#include <unistd.h>

static void stats(FILE* f, const char* name, int bx, int by, std::vector<double> v, bool last) {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    double mean = 0;
    for (double x : v) mean += x;
    mean /= v.size();
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    var = v.size() > 1 ? var / (v.size() - 1) : 0;
    fprintf(f, "    {\"kernel\": \"%s\", \"grid\": [64, 1, 1], \"block\": [%d, %d, 1], \"calls\": 1, \"median_ns\": %.1f, "
               "\"min_ns\": %.1f, \"max_ns\": %.1f, \"mean_ns\": %.1f, \"std_ns\": %.1f, \"iter_total_ns\": [",
            name, bx, by, s[s.size() / 2], s.front(), s.back(), mean, var > 0 ? __builtin_sqrt(var) : 0.0);
    for (size_t i = 0; i < v.size(); ++i) fprintf(f, "%s%.1f", i ? ", " : "", v[i]);
    fprintf(f, "]}%s\n", last ? "" : ",");
}

int main(int argc, char** argv) {
    int n = 5, size = 128;  // --size: the ALPHA_BLOCK alpha_kernel is fastest at (a "problem size")
    const char* json = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--check") && !toy_results_right()) return 1;
    }
    if (BETA_X == 3) abort();  // planted crash
    // For executor tests: how long a "measurement" takes, and which GPU the job was given.
    if (const char* ms = getenv("TOY_BENCH_SLEEP_MS")) usleep(1000 * atoi(ms));
    const char* gpu = getenv("CUDA_VISIBLE_DEVICES");
    const char* model = getenv("TOY_GPU_MODEL");  // a "GPU model" per partition, for sweeps over several
    // A program that ignores the iteration count (as one without NVTX ranges shows one iteration a
    // run): TOY_BENCH_ITERATIONS iterations whatever -n says, numbered from the pid so runs differ.
    int first = 0;
    if (const char* iters = getenv("TOY_BENCH_ITERATIONS")) { n = atoi(iters); first = getpid() % 997; }
    std::vector<double> a, b;
    for (int it = first; it < first + n; ++it) {
        a.push_back(alpha_time_ns(it, size > 0 ? size : 128));
        b.push_back(beta_time_ns(it));
    }
    FILE* f = json ? fopen(json, "w") : stdout;
    fprintf(f, "{\n  \"schema\": \"engine-timing/1\",\n  \"program\": \"toy_bench\",\n");
    // One model ("toy", or TOY_GPU_MODEL) whichever GPU the job was given, as two GPUs of one
    // model are; which one it was is its uuid, as nvidia-smi tells GPUs apart.
    fprintf(f, "  \"device\": {\"name\": \"%s\", \"uuid\": \"toy-GPU-%s\", \"compute_capability\": \"0.0\", "
               "\"multiprocessors\": 0, \"cuda_driver\": 0, \"cuda_runtime\": 0},\n", model ? model : "toy", gpu ? gpu : "");
    fprintf(f, "  \"forward_ms\": {\"median_ms\": %.4f, \"min_ms\": 0, \"max_ms\": 0, \"mean_ms\": 0, \"std_ms\": 0},\n  \"kernels\": [\n",
            (a[0] + b[0]) / 1e6);
    stats(f, "alpha_kernel", ALPHA_BLOCK, 1, a, false);
    stats(f, "beta_kernel", BETA_X, BETA_Y, b, true);
    fprintf(f, "  ]\n}\n");
    if (json) fclose(f);
    return 0;
}
