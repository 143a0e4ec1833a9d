// gemm_stencil: a program of two stages whose kernels have launch sizes of their own:
// a tiled GEMM (tiled_gemm's gemm_tiled_kernel, five tile macros) and Jacobi sweeps
// with their residual (stencil_cmake's jacobi_kernel, five block and tile macros, and
// the residual kernels). It checks both against their references, then times them.
// One iteration: one GEMM per size, then --sweeps Jacobi sweeps and the residual.
//
//   gemm_stencil [--iters N] [--warmup W] [--nvtx] [--check-only] [--json FILE]
//                [--gemm-sizes 256,512,1024] [--grid 4096] [--sweeps 5]
//
// --iters N           timed iterations
// --warmup W          untimed iterations first (outside any NVTX range)
// --nvtx              wrap each timed iteration in an NVTX range named "iteration"
//                     (what the sweep's nsys and cupti backends attribute launches to)
// --check-only        exit after the correctness check (0: right, 1: wrong)
// --json FILE         write the event timing of every launch as engine-timing/1 JSON
// --gemm-sizes LIST   square GEMM sizes M = N = K, each 1..8192
// --grid N            the stencil's N x N grid, 3..8192
// --sweeps S          Jacobi sweeps per iteration, 1..1000
//
// Why it exists: the two stages' macros govern different kernels, each timed apart, so
// a sweep's parameters fall into two groups (sweep.space.groups) of 1,552 and 634 legal
// combinations, a million together. One build measures a point of each: the learning
// strategy keeps a model per group (docs/guide/strategies.md). The defaults are those of
// the brute-forced recordings in bench/data (tiled_gemm's sizes; stencil_large's
// --sizes 4096 --sweeps 5), so those recordings can score a sweep's picks.
#include "engine_timing.cuh"
#include "gemm.cuh"
#include "gemm_check.cuh"
#include "inputs.cuh"
#include "run_options.cuh"
#include "stencil.cuh"
#include "stencil_problem.cuh"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Options : RunOptions {
    std::vector<int> gemm_sizes = {256, 512, 1024};
    int grid = 4096;
    int sweeps = 5;
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool has_value = i + 1 < argc;
        if (take_run_option(argc, argv, i, o)) continue;
        if (a == "--gemm-sizes" && has_value) o.gemm_sizes = int_list(argv[++i]);
        else if (a == "--grid" && has_value) o.grid = atoi(argv[++i]);
        else if (a == "--sweeps" && has_value) o.sweeps = atoi(argv[++i]);
        else {
            fprintf(stderr, "gemm_stencil: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    bool sizes_ok = !o.gemm_sizes.empty() &&
                    std::all_of(o.gemm_sizes.begin(), o.gemm_sizes.end(), [](int s) { return s >= 1 && s <= 8192; });
    if (o.iters < 1 || o.warmup < 0 || !sizes_ok || o.grid < 3 || o.grid > 8192 || o.sweeps < 1 || o.sweeps > 1000) {
        fprintf(stderr, "gemm_stencil: need --iters >= 1, --warmup >= 0, GEMM sizes in 1..8192, --grid in 3..8192, "
                        "--sweeps in 1..1000\n");
        return false;
    }
    return true;
}

// The GEMM operands, sized for the largest GEMM and the edge shape.
struct Gemm {
    std::vector<float> A, B;
    float *dA = nullptr, *dB = nullptr, *dC = nullptr, *dRef = nullptr;

    bool init(int largest) {
        size_t elems = std::max(size_t(largest) * largest, size_t(130 * 97));
        A.resize(elems);
        B.resize(elems);
        fill(A, 1);
        fill(B, 2);
        return !(cudaCheck(cudaMalloc(&dA, elems * 4)) || cudaCheck(cudaMalloc(&dB, elems * 4)) ||
                 cudaCheck(cudaMalloc(&dC, elems * 4)) || cudaCheck(cudaMalloc(&dRef, elems * 4)) ||
                 cudaCheck(cudaMemcpy(dA, A.data(), elems * 4, cudaMemcpyHostToDevice)) ||
                 cudaCheck(cudaMemcpy(dB, B.data(), elems * 4, cudaMemcpyHostToDevice)));
    }
    bool release() {
        bool failed = false;
        for (float* p : {dA, dB, dC, dRef}) failed |= cudaCheck(cudaFree(p));
        return !failed;
    }
};

// Both stages against their references: the GEMM at every timed size and one shape that
// is no multiple of any tile; the stencil at the timed grid and one no block divides.
bool check(const Options& o, Gemm& g, Problem& stencil) {
    std::vector<Shape> shapes = {{97, 130, 45}};
    for (int s : o.gemm_sizes) shapes.push_back({s, s, s});
    for (const Shape& s : shapes)
        if (!check_gemm(s, g.dA, g.dB, g.dC, g.dRef, g.A, g.B)) return false;
    Problem edge;
    if (!edge.init(131, 7)) return false;
    bool ok = check_stencil(edge, o.sweeps) && check_stencil(stencil, o.sweeps);
    return edge.release() && ok;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("gemm_stencil: GEMM BM=%d BN=%d BK=%d TM=%d TN=%d; Jacobi BLOCK %dx%d TILE %dx%d USE_SHARED=%d\n", GEMM_BM,
           GEMM_BN, GEMM_BK, GEMM_TM, GEMM_TN, STENCIL_BLOCK_X, STENCIL_BLOCK_Y, STENCIL_TILE_X, STENCIL_TILE_Y,
           STENCIL_USE_SHARED);
    Gemm g;
    Problem stencil;
    if (!g.init(*std::max_element(o.gemm_sizes.begin(), o.gemm_sizes.end())) || !stencil.init(o.grid, 100)) return 1;
    if (!check(o, g, stencil)) {
        fprintf(stderr, "gemm_stencil: FAILED the check\n");
        return 1;
    }
    printf("check: ok (%zu GEMM shapes, 2 grids)\n", o.gemm_sizes.size() + 1);
    if (o.check_only) return 0;

    // One iteration's launches: each GEMM size, then the stencil's (sweeps + 2), each between
    // two events when `at` is given (the event pairs of that iteration, in launch order).
    const size_t n_gemm = o.gemm_sizes.size(), per = n_gemm + o.sweeps + 2;
    auto iteration = [&](cudaEvent_t* at) {
        for (size_t j = 0; j < n_gemm; ++j) {
            int s = o.gemm_sizes[j];
            if ((at && cudaCheck(cudaEventRecord(at[2 * j]))) || gemm_tiled(s, s, s, g.dA, g.dB, g.dC) ||
                (at && cudaCheck(cudaEventRecord(at[2 * j + 1]))))
                return false;
        }
        cudaEvent_t* rest = at ? at + 2 * n_gemm : nullptr;
        return launch_all(stencil, o.sweeps, rest, rest ? rest + (o.sweeps + 2) : nullptr);
    };
    for (int it = 0; it < o.warmup; ++it)
        if (!iteration(nullptr)) return 1;

    // Event pairs per iteration: the GEMMs' (before, after) interleaved, then the stencil's
    // befores and afters (launch_all's layout).
    std::vector<cudaEvent_t> events(2 * per * size_t(o.iters));
    for (cudaEvent_t& e : events)
        if (cudaCheck(cudaEventCreate(&e))) return 1;
    if (cudaCheck(cudaDeviceSynchronize())) return 1;
    for (int it = 0; it < o.iters; ++it) {
        if (o.nvtx) nvtxRangePushA("iteration");
        if (!iteration(&events[2 * per * size_t(it)])) return 1;
        if (o.nvtx) nvtxRangePop();
    }
    if (cudaCheck(cudaDeviceSynchronize())) return 1;

    EngineTiming timing(o.iters, o.warmup);
    const int sweeps = o.sweeps;
    std::vector<double> gemm_ms(o.iters, 0.0), jacobi_ms(o.iters, 0.0);
    for (int it = 0; it < o.iters; ++it) {
        cudaEvent_t* at = &events[2 * per * size_t(it)];
        for (size_t j = 0; j < n_gemm; ++j) {
            float ms = 0;
            if (cudaCheck(cudaEventElapsedTime(&ms, at[2 * j], at[2 * j + 1]))) return 1;
            int s = o.gemm_sizes[j];
            timing.add("gemm_tiled_kernel", dim3(CEIL_DIV(s, GEMM_BN), CEIL_DIV(s, GEMM_BM)), dim3(GEMM_THREADS), it,
                       ms * 1e6);
            gemm_ms[it] += ms;
        }
        double residual_ms = 0;
        if (!add_stencil_times(timing, o.grid, sweeps, at + 2 * n_gemm, it, jacobi_ms[it], residual_ms)) return 1;
    }
    printf("GEMM sizes %zu, median %.4f ms an iteration; Jacobi N=%d, %d sweeps median %.4f ms, over %d iterations\n",
           n_gemm, summarize(gemm_ms).median, o.grid, sweeps, summarize(jacobi_ms).median, o.iters);
    if (!o.json.empty() && !timing.write(o.json, "gemm_stencil")) return 1;
    for (cudaEvent_t e : events)
        if (cudaCheck(cudaEventDestroy(e))) return 1;
    return g.release() && stencil.release() ? 0 : 1;
}
