// timing.h: what the profile targets (gpt2_forward, gpt2_generate) share for their
// engine-timing/1 JSON (the sweep's events backend, sweep/profile/events.py):
//
//   hold_gpu_kernel  busy-waits on the GPU, so that the launches queued behind it
//                    are all submitted before the first one runs and no launch's
//                    events include a wait for the host (nvbench's blocking kernel)
//   KernelTimes      per kernel x launch shape: every launch's time and each
//                    iteration's total, from the LaunchRecorder's event pairs
//   stats_json       "median_<unit>", "min_", "max_", "mean_", "std_" fields
#pragma once
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "../common.cuh"
#include "stats.h"

// Busy-waits on the GPU for `ns` nanoseconds of its global timer.
static __global__ void hold_gpu_kernel(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

// ns to 0.1 ns, ms to 1 ns: a small model's forward pass takes well under a millisecond.
inline std::string stats_json(const Stats& s, const char* unit) {
    const int digits = strcmp(unit, "ms") == 0 ? 6 : 1;
    char buf[320];
    snprintf(buf, sizeof(buf), "\"median_%s\": %.*f, \"min_%s\": %.*f, \"max_%s\": %.*f, \"mean_%s\": %.*f, \"std_%s\": %.*f",
             unit, digits, s.median, unit, digits, s.min, unit, digits, s.max, unit, digits, s.mean, unit, digits, s.std);
    return buf;
}

// Per-launch CUDA-event times grouped by kernel and launch shape, one iteration at a time.
class KernelTimes {
public:
    // Adds one iteration's recorded launches; their events must have completed.
    // Returns 0, or -1 on a CUDA error (printed).
    int add_iteration(const std::vector<LaunchRecord>& records) {
        std::map<ShapeKey, double> totals;
        for (const LaunchRecord& r : records) {
            float ms = 0;
            if (cudaCheck(cudaEventElapsedTime(&ms, r.start, r.stop))) return -1;
            const ShapeKey key{r.kernel, r.grid.x, r.grid.y, r.grid.z, r.block.x, r.block.y, r.block.z};
            kernels_[key].launches_ns.push_back(ms * 1e6);
            totals[key] += ms * 1e6;
        }
        for (auto& [key, total] : totals) kernels_[key].iter_total_ns.push_back(total);
        return 0;
    }

    // The engine-timing/1 "kernels" array (key and value, no trailing comma or newline):
    // calls = launches per iteration of `iterations`.
    void write_json(FILE* out, int iterations) const {
        fprintf(out, "  \"kernels\": [");
        bool first = true;
        for (const auto& [key, s] : kernels_) {
            const auto& [name, gx, gy, gz, bx, by, bz] = key;
            fprintf(out, "%s\n    {\"kernel\": \"%s\", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"calls\": %zu, %s, \"iter_total_ns\": [",
                    first ? "" : ",", name.c_str(), gx, gy, gz, bx, by, bz, s.launches_ns.size() / iterations,
                    stats_json(summarize(s.launches_ns), "ns").c_str());
            for (size_t i = 0; i < s.iter_total_ns.size(); ++i) fprintf(out, "%s%.1f", i ? ", " : "", s.iter_total_ns[i]);
            fprintf(out, "]}");
            first = false;
        }
        fprintf(out, "\n  ]");
    }

private:
    using ShapeKey = std::tuple<std::string, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned>;
    struct Samples {
        std::vector<double> launches_ns;
        std::vector<double> iter_total_ns;
    };
    std::map<ShapeKey, Samples> kernels_;
};
