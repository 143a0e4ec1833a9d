// brute_force_harness.cuh: what every example's one-process harness for
// bench/brute_force.py shares (the build puts bench/ on the include path). An
// example's brute_force.cuh defines its BruteForceBench (inputs, outputs and
// two events) and, per configuration, brute_force_one<...>: it clears the
// outputs and calls brute_force_measure with a launch and a check (most
// checks compare every output with a reference's on the GPU:
// brute_force_all_match); its brute_force_main.cu hands brute_force_main the
// generated list and the bench's setup.
//
// Per configuration (brute_force_measure):
//   1. one launch, synchronized: an error fails the configuration;
//   2. the example's check of that launch's result: false fails it ("wrong result");
//   3. one more launch warms up; then `reps` launches, each between two
//      events; bench/brute_force.py's cache takes their median (ms).
// An error that poisons the context (the next synchronize fails too) ends the
// process with exit 3, and the driver starts it again after that configuration.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

struct BruteForceResult {
    const char* failure = nullptr;     // Kernel Tuner's failure string, or null
    const char* detail = "";
    std::vector<float> times_ms;
};

// A failed configuration, and why; exit 3 instead when the error left the context unusable.
inline BruteForceResult brute_force_failed(cudaError_t e, const char* detail) {
    if (e != cudaSuccess && cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "brute_force: %s left the context unusable\n", cudaGetErrorString(e));
        exit(3);
    }
    BruteForceResult f;
    f.failure = "RuntimeFailedConfig";
    f.detail = detail;
    return f;
}

// launch() -> cudaError_t starts the configuration's kernel; check() -> bool says whether the
// first launch's result is right.
template <class Launch, class Check>
BruteForceResult brute_force_measure(cudaEvent_t start, cudaEvent_t stop, Launch launch, Check check) {
    cudaError_t e = launch();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return brute_force_failed(e, cudaGetErrorString(e));
    if (!check()) return brute_force_failed(cudaSuccess, "wrong result");
    auto timed = [&](float& ms) {   // one launch between two events: its time in ms, or the error
        cudaEventRecord(start);
        cudaError_t err = launch();
        cudaEventRecord(stop);
        if (err == cudaSuccess) err = cudaEventSynchronize(stop);
        if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, start, stop);
        return err;
    };
    // The warm-up also says how long a launch takes: slow ones get fewer repetitions.
    float first = 0;
    e = timed(first);
    const int reps = first > 20.0f ? 3 : 7;
    BruteForceResult r;
    for (int i = 0; i < reps && e == cudaSuccess; ++i) {
        float ms = 0;
        e = timed(ms);
        r.times_ms.push_back(ms);
    }
    return e == cudaSuccess ? r : brute_force_failed(e, cudaGetErrorString(e));
}

// Counts the outputs i in [0, n) for which matches(i) is false.
template <class Matches>
__global__ void brute_force_count_mismatches(size_t n, Matches matches, unsigned* bad) {
    size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n && !matches(i)) atomicAdd(bad, 1u);
}

// Whether all n outputs are right: matches is a functor whose `__device__ bool operator()(size_t i)
// const` compares output i with the reference's (it is copied to the GPU by value, so it holds
// device pointers and tolerances); dBad is one device counter. False too when the count cannot be
// read back, so a failed check never passes.
template <class Matches>
bool brute_force_all_match(size_t n, Matches matches, unsigned* dBad) {
    unsigned bad = 0;
    if (n == 0) return true;   // a grid of no block is a launch error, left behind for the next launch
    if (cudaMemset(dBad, 0, sizeof(unsigned)) != cudaSuccess) return false;
    brute_force_count_mismatches<<<unsigned((n + 255) / 256), 256>>>(n, matches, dBad);
    return cudaMemcpy(&bad, dBad, sizeof(unsigned), cudaMemcpyDeviceToHost) == cudaSuccess && bad == 0;
}

// Every example's brute_force.cuh defines its struct BruteForceBench before including this header.
struct BruteForceEntry {
    const char* key;                   // the values, comma-separated, in the space's order
    BruteForceResult (*run)(BruteForceBench&);
};

// The configurations in the space's order: bench/brute_force.py generates it (its registry.cu).
void brute_force_entries(std::vector<BruteForceEntry>& entries);

// --start I and --end J; any other "--name value" pair goes to other(name, value), which returns
// false for a name it does not know. False (after one line on stderr) on a bad argument.
template <class Other>
bool brute_force_args(int argc, char** argv, long& start, long& end, Other other) {
    for (int i = 1; i < argc; i += 2) {
        std::string a = argv[i];
        bool known = i + 1 < argc;
        if (known && a == "--start") start = atol(argv[i + 1]);
        else if (known && a == "--end") end = atol(argv[i + 1]);
        else if (!known || !other(a, argv[i + 1])) {
            fprintf(stderr, "brute_force: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    return true;
}

// The run's first line: the device, its driver, and `problem` (JSON members naming the problem's
// size, such as "\"problem_size\": [8192, 2048]") and how many configurations the build holds.
inline void brute_force_header(const std::string& problem, size_t count) {
    cudaDeviceProp prop;
    int driver = 0;
    cudaGetDeviceProperties(&prop, 0);
    cudaDriverGetVersion(&driver);
    printf("{\"device\": \"%s\", \"driver\": %d, %s, \"count\": %zu}\n", prop.name, driver, problem.c_str(), count);
    fflush(stdout);
}

// Configurations start..end-1 of entries (end < 0: to the last), one JSON line each, flushed.
inline void brute_force_run(const std::vector<BruteForceEntry>& entries, BruteForceBench& b, long start, long end) {
    if (end < 0 || end > long(entries.size())) end = long(entries.size());
    for (long i = start; i < end; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        BruteForceResult r = entries[i].run(b);
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("{\"i\": %ld, \"key\": \"%s\", \"wall_s\": %.6f, ", i, entries[i].key, wall);
        if (r.failure) {
            printf("\"failure\": \"%s\", \"detail\": \"%s\"}\n", r.failure, r.detail);
        } else {
            printf("\"times\": [");
            for (size_t k = 0; k < r.times_ms.size(); ++k) printf("%s%.6f", k ? ", " : "", r.times_ms[k]);
            printf("]}\n");
        }
        fflush(stdout);
    }
}

// An example's whole main. The arguments: --start and --end, and any other the example takes,
// through other(bench, name, value) as brute_force_args says. Then the generated list, then
// setup(bench, problem): inputs, reference and events, returning 0 with the header's problem
// members in `problem` (such as "\"problem_size\": [8192, 2048]"), or the exit status after a
// line on stderr. Then the run.
template <class Setup, class Other>
int brute_force_main(int argc, char** argv, Setup setup, Other other) {
    BruteForceBench b;
    long start = 0, end = -1;
    auto option = [&](const std::string& name, const char* value) { return other(b, name, value); };
    if (!brute_force_args(argc, argv, start, end, option)) return 2;
    std::vector<BruteForceEntry> entries;
    brute_force_entries(entries);
    std::string problem;
    if (int status = setup(b, problem)) return status;
    brute_force_header(problem, entries.size());
    brute_force_run(entries, b, start, end);
    return 0;
}

// The same, for an example that takes no argument but --start and --end.
template <class Setup>
int brute_force_main(int argc, char** argv, Setup setup) {
    return brute_force_main(argc, argv, setup, [](BruteForceBench&, const std::string&, const char*) { return false; });
}
