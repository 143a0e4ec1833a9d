// stencil_problem.cuh: one stencil problem on the device, its launches (Jacobi sweeps, then the
// residual) and their check against a CPU reference (stencil, gemm_stencil).
#pragma once

#include "engine_timing.cuh"
#include "inputs.cuh"
#include "stencil.cuh"

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

// One problem on the device: u (the boundary random, the interior 0), f, a
// second buffer for the ping-pong, the partial sums and the residual.
struct Problem {
    int n = 0;
    std::vector<float> u0, f;
    float *dU[2] = {nullptr, nullptr}, *dF = nullptr;
    double *dPartial = nullptr, *dResidual = nullptr;

    bool init(int size, uint32_t seed) {
        n = size;
        size_t elems = size_t(n) * n;
        u0.assign(elems, 0.0f);
        f.resize(elems);
        fill(f, seed, 0.01f);
        std::vector<float> edge(4 * size_t(n));
        fill(edge, seed + 1, 1.0f);
        for (int k = 0; k < n; ++k) {
            u0[k] = edge[k];
            u0[size_t(n - 1) * n + k] = edge[n + k];
            u0[size_t(k) * n] = edge[2 * n + k];
            u0[size_t(k) * n + n - 1] = edge[3 * n + k];
        }
        return !(cudaCheck(cudaMalloc(&dU[0], elems * 4)) || cudaCheck(cudaMalloc(&dU[1], elems * 4)) ||
                 cudaCheck(cudaMalloc(&dF, elems * 4)) ||
                 cudaCheck(cudaMalloc(&dPartial, size_t(residual_blocks(n)) * sizeof(double))) ||
                 cudaCheck(cudaMalloc(&dResidual, sizeof(double))) ||
                 cudaCheck(cudaMemcpy(dF, f.data(), elems * 4, cudaMemcpyHostToDevice)) || reset());
    }
    bool reset() {   // u back to its start, in the buffer the first sweep reads
        return cudaCheck(cudaMemcpy(dU[0], u0.data(), u0.size() * 4, cudaMemcpyHostToDevice));
    }
    bool release() {
        bool failed = false;
        for (void* p : {(void*)dU[0], (void*)dU[1], (void*)dF, (void*)dPartial, (void*)dResidual})
            failed |= cudaCheck(cudaFree(p));
        return !failed;
    }
};

// The CPU reference: the same sweeps in the same order of operations (fp32),
// the residual in fp64.
inline void reference(const Problem& p, int sweeps, std::vector<float>& u, double& residual) {
    const int n = p.n;
    u = p.u0;
    std::vector<float> next = u;
    for (int s = 0; s < sweeps; ++s) {
        for (int i = 1; i < n - 1; ++i)
            for (int j = 1; j < n - 1; ++j) {
                size_t at = size_t(i) * n + j;
                next[at] = 0.25f * (u[at - n] + u[at + n] + u[at - 1] + u[at + 1] + p.f[at]);
            }
        std::swap(u, next);
    }
    residual = 0.0;
    for (int i = 1; i < n - 1; ++i)
        for (int j = 1; j < n - 1; ++j) {
            size_t at = size_t(i) * n + j;
            double r = double(p.f[at]) + u[at - n] + u[at + n] + u[at - 1] + u[at + 1] - 4.0 * u[at];
            residual += r * r;
        }
}

// Which buffer holds u after `sweeps` sweeps from dU[0].
inline int result_buffer(int sweeps) { return sweeps % 2; }

// The launches of one size and iteration; `before`/`after` (may be null) are
// recorded around each launch, in launch order: sweeps Jacobi, then 2 residual.
inline bool launch_all(Problem& p, int sweeps, cudaEvent_t* before, cudaEvent_t* after) {
    int k = 0;
    auto timed = [&](auto&& launch) {
        if (before && cudaCheck(cudaEventRecord(before[k]))) return true;
        if (launch()) return true;
        if (after && cudaCheck(cudaEventRecord(after[k]))) return true;
        ++k;
        return false;
    };
    for (int s = 0; s < sweeps; ++s)
        if (timed([&] { return jacobi(p.n, p.dU[s % 2], p.dF, p.dU[(s + 1) % 2]); })) return false;
    const float* u = p.dU[result_buffer(sweeps)];
    return !timed([&] { return residual_partial(p.n, u, p.dF, p.dPartial); }) &&
           !timed([&] { return residual_sum(residual_blocks(p.n), p.dPartial, p.dResidual); });
}

// One iteration's stencil launch times at size n, read from the events launch_all
// recorded (launch k between before[k] and before[sweeps + 2 + k]) into `timing`, each
// launch under its kernel and shape; the Jacobi sweeps' and the residual's milliseconds
// are added to jacobi_ms and residual_ms. False if an event cannot be read.
inline bool add_stencil_times(EngineTiming& timing, int n, int sweeps, const cudaEvent_t* before, int it,
                              double& jacobi_ms, double& residual_ms) {
    struct { const char* kernel; dim3 grid, block; } launches[3] = {
        {"jacobi_kernel", jacobi_grid(n), jacobi_block()},
        {"residual_partial_kernel", dim3(residual_blocks(n)), dim3(STENCIL_RED_BLOCK)},
        {"residual_sum_kernel", dim3(1), dim3(STENCIL_RED_BLOCK)}};
    for (int k = 0; k < sweeps + 2; ++k) {
        float ms = 0;
        if (cudaCheck(cudaEventElapsedTime(&ms, before[k], before[sweeps + 2 + k]))) return false;
        const auto& l = launches[k < sweeps ? 0 : k - sweeps + 1];
        timing.add(l.kernel, l.grid, l.block, it, ms * 1e6);
        (k < sweeps ? jacobi_ms : residual_ms) += ms;
    }
    return true;
}

// The kernels against the CPU reference at one size: every point of u within
// atol + |ref| * rtol (the GPU may contract to FMAs), the residual within rtol.
inline bool check_stencil(Problem& p, int sweeps) {
    if (p.reset() || !launch_all(p, sweeps, nullptr, nullptr)) return false;
    std::vector<float> got(p.u0.size()), want;
    double residual = 0, want_residual = 0;
    if (cudaCheck(cudaMemcpy(got.data(), p.dU[result_buffer(sweeps)], got.size() * 4, cudaMemcpyDeviceToHost)) ||
        cudaCheck(cudaMemcpy(&residual, p.dResidual, sizeof(double), cudaMemcpyDeviceToHost)))
        return false;
    reference(p, sweeps, want, want_residual);
    const double atol = 1e-5, rtol = 1e-4;
    for (size_t at = 0; at < got.size(); ++at) {
        if (!(std::fabs(double(got[at]) - want[at]) <= atol + std::fabs(want[at]) * rtol)) {
            fprintf(stderr, "jacobi_kernel (BLOCK %dx%d, USE_SHARED=%d) is wrong at N=%d after %d sweeps: "
                            "u[%zu][%zu] = %g, the CPU says %g\n",
                    STENCIL_BLOCK_X, STENCIL_BLOCK_Y, STENCIL_USE_SHARED, p.n, sweeps, at / p.n, at % p.n, got[at],
                    want[at]);
            return false;
        }
    }
    // The residual of the GPU's u, which may differ from the CPU's in the last bits.
    if (!(std::fabs(residual - want_residual) <= 1e-3 * want_residual + 1e-9)) {
        fprintf(stderr, "residual kernels (RED_BLOCK=%d ITEMS=%d) are wrong at N=%d: %.10g, the CPU says %.10g\n",
                STENCIL_RED_BLOCK, STENCIL_ITEMS, p.n, residual, want_residual);
        return false;
    }
    return true;
}
