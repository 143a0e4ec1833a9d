// stencil: checks jacobi_kernel and the residual kernels against a CPU reference,
// then times them with CUDA events at several grid sizes. One iteration, per
// size: --sweeps Jacobi sweeps (ping-pong between two buffers), then the residual
// of the result (residual_partial_kernel, then residual_sum_kernel).
//
//   stencil [--sizes 512,1024,2048] [--sweeps S] [--iters N] [--warmup W] [--check-only] [--json FILE]
//
// --sizes LIST   grid sizes N (an N x N grid, boundary included), each 3..8192
// --sweeps S     Jacobi sweeps per size and iteration (default 10)
// --iters N      timed iterations
// --warmup W     untimed iterations first
// --check-only   exit after the correctness check (0: right, 1: wrong)
// --json FILE    write the event timing of every launch as engine-timing/1 JSON
//                (what the sweep's events backend reads), as tiled_gemm does
//
// It opens no NVTX range: a profiler that attributes launches to NVTX ranges
// sees one iteration holding every launch, the check's included; its own
// events time only the timed iterations. The check runs first, every time (exit
// 1 before any timing when the launch sizes compute wrong results).
#include "engine_timing.cuh"
#include "run_options.cuh"
#include "stencil.cuh"
#include "stencil_problem.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Options : RunOptions {
    int sweeps = 10;
    std::vector<int> sizes = {512, 1024, 2048};
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool has_value = i + 1 < argc;
        if (take_run_option(argc, argv, i, o, /*nvtx=*/false)) continue;   // it opens no NVTX range
        if (a == "--sweeps" && has_value) o.sweeps = atoi(argv[++i]);
        else if (a == "--sizes" && has_value) o.sizes = int_list(argv[++i]);
        else {
            fprintf(stderr, "stencil: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    bool sizes_ok = !o.sizes.empty() &&
                    std::all_of(o.sizes.begin(), o.sizes.end(), [](int s) { return s >= 3 && s <= 8192; });
    if (o.iters < 1 || o.warmup < 0 || o.sweeps < 1 || o.sweeps > 1000 || !sizes_ok) {
        fprintf(stderr, "stencil: need --iters >= 1, --warmup >= 0, --sweeps in 1..1000, sizes in 3..8192\n");
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("stencil: BLOCK %dx%d TILE %dx%d USE_SHARED=%d (%d B shared memory), RED_BLOCK=%d ITEMS=%d, %d sweeps\n",
           STENCIL_BLOCK_X, STENCIL_BLOCK_Y, STENCIL_TILE_X, STENCIL_TILE_Y, STENCIL_USE_SHARED, STENCIL_SMEM_BYTES,
           STENCIL_RED_BLOCK, STENCIL_ITEMS, o.sweeps);

    // Every timed size, and one size that is no multiple of any block (edges).
    std::vector<Problem> problems(o.sizes.size());
    for (size_t j = 0; j < o.sizes.size(); ++j)
        if (!problems[j].init(o.sizes[j], 100 + uint32_t(j))) return 1;
    Problem edge;
    if (!edge.init(131, 7)) return 1;
    bool ok = check_stencil(edge, o.sweeps);
    for (size_t j = 0; ok && j < problems.size(); ++j) ok = check_stencil(problems[j], o.sweeps);
    if (!edge.release()) return 1;
    if (!ok) {
        fprintf(stderr, "stencil: FAILED the check\n");
        return 1;
    }
    printf("check: ok (%zu sizes)\n", problems.size() + 1);
    if (o.check_only) return 0;

    for (int it = 0; it < o.warmup; ++it)
        for (Problem& p : problems)
            if (!launch_all(p, o.sweeps, nullptr, nullptr)) return 1;

    const int per = o.sweeps + 2;   // launches per size and iteration
    size_t n = problems.size();
    std::vector<cudaEvent_t> events(2 * n * per * size_t(o.iters));
    for (cudaEvent_t& e : events)
        if (cudaCheck(cudaEventCreate(&e))) return 1;
    auto before = [&](int it, size_t j) { return &events[2 * ((size_t(it) * n + j) * per)]; };
    if (cudaCheck(cudaDeviceSynchronize())) return 1;
    for (int it = 0; it < o.iters; ++it)
        for (size_t j = 0; j < n; ++j) {
            cudaEvent_t* b = before(it, j);
            if (!launch_all(problems[j], o.sweeps, b, b + per)) return 1;
        }
    if (cudaCheck(cudaDeviceSynchronize())) return 1;

    // The residual_sum_kernel has one shape at every size, so its calls of all sizes share an entry.
    EngineTiming timing(o.iters, o.warmup);
    for (size_t j = 0; j < n; ++j) {
        int size = problems[j].n;
        std::vector<double> jacobi_ms(o.iters, 0.0), residual_ms(o.iters, 0.0);
        for (int it = 0; it < o.iters; ++it)
            if (!add_stencil_times(timing, size, o.sweeps, before(it, j), it, jacobi_ms[it], residual_ms[it]))
                return 1;
        double residual = 0;
        if (cudaCheck(cudaMemcpy(&residual, problems[j].dResidual, sizeof(double), cudaMemcpyDeviceToHost))) return 1;
        double jm = summarize(jacobi_ms).median, rm = summarize(residual_ms).median;
        printf("N=%d: jacobi grid %ux%u, %d sweeps median %.4f ms (%.1f GB/s); residual %d blocks median %.4f ms; "
               "residual %.6g, over %d iterations\n",
               size, jacobi_grid(size).x, jacobi_grid(size).y, o.sweeps, jm,
               3.0 * 4 * double(size) * size * o.sweeps / (jm * 1e6), residual_blocks(size), rm, residual, o.iters);
    }
    if (!o.json.empty() && !timing.write(o.json, "stencil")) return 1;
    for (cudaEvent_t e : events)
        if (cudaCheck(cudaEventDestroy(e))) return 1;
    for (Problem& p : problems)
        if (!p.release()) return 1;
    return 0;
}
