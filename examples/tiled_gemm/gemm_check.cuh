// gemm_check.cuh: gemm_tiled_kernel checked against gemm_reference_kernel at one shape, the
// reference itself spot-checked on the CPU in double (tiled_gemm, gemm_stencil).
#pragma once

#include "gemm.cuh"

#include <cmath>
#include <cstdio>
#include <vector>

struct Shape {
    int M, N, K;
};

// The tiled kernel against the reference kernel at one shape, every element
// within atol + |ref| * rtol; the reference itself is spot-checked on the CPU
// (in double), so a bug the two kernels share is caught too.
inline bool check_gemm(const Shape& s, const float* dA, const float* dB, float* dC, float* dRef,
                       const std::vector<float>& A, const std::vector<float>& B) {
    const double atol = 1e-4 * std::sqrt(double(s.K)), rtol = 1e-4;
    if (gemm_tiled(s.M, s.N, s.K, dA, dB, dC) || gemm_reference(s.M, s.N, s.K, dA, dB, dRef)) return false;
    std::vector<float> C(size_t(s.M) * s.N), ref(C.size());
    if (cudaCheck(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost)) ||
        cudaCheck(cudaMemcpy(ref.data(), dRef, ref.size() * 4, cudaMemcpyDeviceToHost)))
        return false;
    for (int probe = 0; probe < 64; ++probe) {
        int r = int((probe * 7919u) % unsigned(s.M)), c = int((probe * 104729u) % unsigned(s.N));
        double want = 0;
        for (int k = 0; k < s.K; ++k) want += double(A[size_t(r) * s.K + k]) * B[size_t(k) * s.N + c];
        double got = ref[size_t(r) * s.N + c];
        if (std::fabs(got - want) > atol + std::fabs(want) * rtol) {
            fprintf(stderr, "gemm_reference_kernel is wrong at %dx%dx%d, C[%d][%d] = %g, the CPU says %g\n",
                    s.M, s.N, s.K, r, c, got, want);
            return false;
        }
    }
    for (size_t i = 0; i < C.size(); ++i) {
        if (!(std::fabs(C[i] - ref[i]) <= atol + std::fabs(ref[i]) * rtol)) {
            fprintf(stderr, "gemm_tiled_kernel (BM=%d BN=%d BK=%d TM=%d TN=%d) is wrong at %dx%dx%d: "
                            "C[%zu][%zu] = %g, the reference says %g\n",
                    GEMM_BM, GEMM_BN, GEMM_BK, GEMM_TM, GEMM_TN, s.M, s.N, s.K, i / s.N, i % s.N, C[i], ref[i]);
            return false;
        }
    }
    return true;
}

