// engine_timing.cuh: a program's own CUDA-event timing, written as the
// engine-timing/1 JSON the sweep's events backend reads (sweep/profile/events.py).
//
//   EngineTiming timing(o.iters, o.warmup);
//   timing.add("my_kernel", grid, block, it, ns);     // each timed launch, in iteration `it`
//   if (!timing.write(path, "my_program")) return 1;
//
// One entry per kernel and launch shape (grid x block): the statistics of its calls
// in ns, how many calls an iteration makes, and its total per iteration; forward_ms
// is every entry's total per iteration, summed. A program that launches one kernel
// at several problem sizes gets one entry per size (each its own grid), so the sweep
// sees each launch shape apart. Copy this file (and cuda_check.cuh) beside your own
// program to give it `--json FILE` and the events backend.
#pragma once

#include "cuda_check.cuh"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

// Times launch() (a callable returning true on a failure, as cudaCheck does) once in
// each of `iters` iterations, each launch between a pair of CUDA events. The
// iterations lie between cudaProfilerStart and cudaProfilerStop (so `nsys profile
// --capture-range=cudaProfilerApi` captures just them) and, with `nvtx`, each in an
// NVTX range named "iteration" (what the sweep's nsys and cupti backends attribute
// launches to). ns: each launch's time. False on any CUDA failure, reported on stderr.
template <class Launch>
bool time_each_iteration(int iters, bool nvtx, Launch launch, std::vector<double>& ns) {
    std::vector<cudaEvent_t> events(2 * size_t(iters));
    for (cudaEvent_t& e : events)
        if (cudaCheck(cudaEventCreate(&e))) return false;
    bool ok = !cudaCheck(cudaDeviceSynchronize()) && !cudaCheck(cudaProfilerStart());
    for (int it = 0; ok && it < iters; ++it) {
        if (nvtx) nvtxRangePushA("iteration");
        ok = !cudaCheck(cudaEventRecord(events[2 * it])) && !launch() && !cudaCheck(cudaEventRecord(events[2 * it + 1]));
        if (nvtx) nvtxRangePop();
    }
    ok = ok && !cudaCheck(cudaDeviceSynchronize()) && !cudaCheck(cudaProfilerStop());
    ns.assign(iters, 0.0);
    for (int it = 0; ok && it < iters; ++it) {
        float ms = 0;
        ok = !cudaCheck(cudaEventElapsedTime(&ms, events[2 * it], events[2 * it + 1]));
        ns[it] = ms * 1e6;
    }
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    return ok;
}

// median (the upper one of an even count), min, max, mean and sample standard deviation
struct Summary {
    double median, min, max, mean, std;
};

inline Summary summarize(std::vector<double> v) {
    if (v.empty()) return {0, 0, 0, 0, 0};
    std::sort(v.begin(), v.end());
    double mean = 0, var = 0;
    for (double x : v) mean += x / v.size();
    for (double x : v) var += (x - mean) * (x - mean);
    return {v[v.size() / 2], v.front(), v.back(), mean, v.size() > 1 ? std::sqrt(var / (v.size() - 1)) : 0.0};
}

class EngineTiming {
public:
    EngineTiming(int iters, int warmup) : iters_(iters), warmup_(warmup) {}

    // One timed call of `kernel` at launch shape grid x block, in timed iteration `it`
    // (0 .. iters - 1), that took `ns` nanoseconds.
    void add(const char* kernel, dim3 grid, dim3 block, int it, double ns) {
        Entry& e = entry(kernel, grid, block);
        e.call_ns.push_back(ns);
        if (it >= 0 && it < iters_) e.iter_total_ns[it] += ns;
    }

    // Writes the JSON to `path`; false (with the reason on stderr) when it cannot.
    bool write(const std::string& path, const char* program) const {
        int dev = 0, driver = 0, runtime = 0;
        cudaDeviceProp prop;
        if (cudaCheck(cudaGetDevice(&dev)) || cudaCheck(cudaGetDeviceProperties(&prop, dev)) ||
            cudaCheck(cudaDriverGetVersion(&driver)) || cudaCheck(cudaRuntimeGetVersion(&runtime)))
            return false;
        FILE* f = fopen(path.c_str(), "w");
        if (!f) {
            fprintf(stderr, "%s: cannot write %s\n", program, path.c_str());
            return false;
        }
        std::vector<double> per_iter(iters_, 0.0);
        for (const Entry& e : entries_)
            for (int it = 0; it < iters_; ++it) per_iter[it] += e.iter_total_ns[it] / 1e6;
        Summary fw = summarize(per_iter);
        fprintf(f, "{\"schema\": \"engine-timing/1\", \"program\": \"%s\",\n"
                   " \"device\": {\"name\": \"%s\", \"cuda_driver\": %d, \"cuda_runtime\": %d},\n"
                   " \"run\": {\"iterations\": %d, \"warmup\": %d},\n"
                   " \"forward_ms\": {\"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, \"mean_ms\": %.6f, "
                   "\"std_ms\": %.6f},\n \"kernels\": [",
                json_text(program).c_str(), json_text(prop.name).c_str(), driver, runtime, iters_, warmup_,
                fw.median, fw.min, fw.max, fw.mean, fw.std);
        for (size_t j = 0; j < entries_.size(); ++j) {
            const Entry& e = entries_[j];
            Summary s = summarize(e.call_ns);
            fprintf(f, "%s\n  {\"kernel\": \"%s\", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"calls\": %zu, "
                       "\"median_ns\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f, \"mean_ns\": %.1f, \"std_ns\": %.1f, "
                       "\"iter_total_ns\": [",
                    j ? "," : "", json_text(e.kernel.c_str()).c_str(), e.grid.x, e.grid.y, e.grid.z, e.block.x,
                    e.block.y, e.block.z, iters_ > 0 ? e.call_ns.size() / iters_ : 0, s.median, s.min, s.max, s.mean,
                    s.std);
            for (int it = 0; it < iters_; ++it) fprintf(f, "%s%.1f", it ? ", " : "", e.iter_total_ns[it]);
            fprintf(f, "]}");
        }
        fprintf(f, "\n]}\n");
        return fclose(f) == 0;
    }

private:
    // One kernel at one launch shape: the times of its calls, and their sum per iteration.
    struct Entry {
        std::string kernel;
        dim3 grid, block;
        std::vector<double> call_ns, iter_total_ns;
    };

    Entry& entry(const char* kernel, dim3 grid, dim3 block) {
        for (Entry& e : entries_)
            if (e.kernel == kernel && e.grid.x == grid.x && e.grid.y == grid.y && e.grid.z == grid.z &&
                e.block.x == block.x && e.block.y == block.y && e.block.z == block.z)
                return e;
        entries_.push_back({kernel, grid, block, {}, std::vector<double>(iters_, 0.0)});
        return entries_.back();
    }

    // `s` inside a JSON string: quotes, backslashes and control characters escaped.
    static std::string json_text(const char* s) {
        std::string out;
        for (; *s; ++s) {
            unsigned char c = static_cast<unsigned char>(*s);
            if (c == '"' || c == '\\') {
                out += '\\';
                out += char(c);
            } else if (c < 0x20) {
                char buf[8];
                snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += char(c);
            }
        }
        return out;
    }

    int iters_, warmup_;
    std::vector<Entry> entries_;
};
