// timed_run.cuh: the timed run of an example that launches one kernel, of one launch
// shape, per iteration, as the run options ask for it:
//
//   double median_ms;
//   if (!time_one_kernel(o, "my_program", "my_kernel", grid, block, [&] { return my_launch(...); }, median_ms))
//       return 1;
//
// o.warmup untimed launches, then o.iters timed ones (time_each_iteration: each between
// CUDA events, inside cudaProfilerStart/Stop and, with --nvtx, an NVTX range) and, with
// --json, their engine-timing/1 file: one entry, `kernel` at grid x block. The launch is
// a callable returning true on a failure, as cudaCheck does. median_ms: the launches'
// median. False after any CUDA failure (reported on stderr) or an unwritable file.
#pragma once

#include "engine_timing.cuh"
#include "run_options.cuh"

#include <vector>

template <class Launch>
bool time_one_kernel(const RunOptions& o, const char* program, const char* kernel, dim3 grid, dim3 block,
                     Launch launch, double& median_ms) {
    for (int it = 0; it < o.warmup; ++it)
        if (launch()) return false;
    std::vector<double> ns;
    if (!time_each_iteration(o.iters, o.nvtx, launch, ns)) return false;
    median_ms = summarize(ns).median / 1e6;
    if (o.json.empty()) return true;
    EngineTiming timing(o.iters, o.warmup);
    for (int it = 0; it < o.iters; ++it) timing.add(kernel, grid, block, it, ns[it]);
    return timing.write(o.json, program);
}
