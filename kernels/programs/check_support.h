// check_support.h: kernel_check's scaffolding (included by kernel_check.cu only): fresh
// random inputs, device buffers poisoned with NaN, the pass/fail line and JSON row of each
// check, and the double-precision references the checks share (LayerNorm, matmul with
// every epilogue, causal attention).
#pragma once
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../common.cuh"
#include "../types.h"

namespace {


std::mt19937 rng(20261123);
int failures = 0, checks = 0;
std::string json_rows;

std::vector<float> random_vec(size_t n, float lo = -1.f, float hi = 1.f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// A device copy of a host vector, with `offset` spare floats in front so a
// caller can hand out a pointer that is not 16-byte aligned (the scalar paths).
struct Dev {
    float* base = nullptr;
    float* p = nullptr;
    size_t n = 0;
    Dev(const std::vector<float>& h, int offset = 0) : n(h.size()) {
        cudaCheck(cudaMalloc(&base, (n + offset + 4) * sizeof(float)));
        p = base + offset;
        cudaCheck(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    Dev(size_t count, int offset = 0) : n(count) {
        cudaCheck(cudaMalloc(&base, (n + offset + 4) * sizeof(float)));
        p = base + offset;
        cudaCheck(cudaMemset(p, 0xff, n * sizeof(float)));  // NaN poison
    }
    ~Dev() { cudaFree(base); }
    std::vector<float> get() const {
        std::vector<float> h(n);
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
        return h;
    }
};

// Compares got against want (with per-element scale for the tolerance).
void expect(const std::string& name, int launch_status, const std::vector<float>& got, const std::vector<double>& want,
            const std::vector<double>& scale, double atol, double rtol) {
    ++checks;
    double max_err = 0;
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double err = std::fabs((double)got[i] - want[i]);
        const double tol = atol + rtol * scale[i];
        if (!(err <= tol)) {  // NaN fails
            if (!bad) first_bad = i;
            ++bad;
        }
        if (!(err <= max_err)) max_err = std::isnan(err) ? INFINITY : err;
    }
    const bool pass = launch_status == 0 && bad == 0 && got.size() == want.size();
    failures += !pass;
    printf("%-52s %s  max_err=%.2e  bad=%zu/%zu", name.c_str(), pass ? "PASS" : "FAIL", max_err, bad, want.size());
    if (bad) printf("  first bad [%zu]: got %.6g want %.6g", first_bad, got[first_bad], want[first_bad]);
    if (launch_status) printf("  (launch failed)");
    printf("\n");
    char row[512];
    snprintf(row, sizeof(row), "%s\n  {\"check\": \"%s\", \"pass\": %s, \"max_err\": %.3e, \"bad\": %zu}", json_rows.empty() ? "" : ",",
             name.c_str(), pass ? "true" : "false", max_err, bad);
    json_rows += row;
}

std::vector<double> abs_of(const std::vector<double>& v) {
    std::vector<double> a(v.size());
    for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
    return a;
}

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

void layernorm_ref(const float* x, const float* w, const float* b, int C, double eps, double* out) {
    double mean = 0, var = 0;
    for (int i = 0; i < C; ++i) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
    var /= C;
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int i = 0; i < C; ++i) out[i] = (x[i] - mean) * rstd * w[i] + b[i];
}

// out[M,N] = A[M,K] . W[N,K]^T
void matmul_ref(const std::vector<float>& A, const std::vector<float>& W, int M, int N, int K, std::vector<double>& out,
                std::vector<double>& scale) {
    out.assign((size_t)M * N, 0.0);
    scale.assign((size_t)M * N, 0.0);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double s = 0, a = 0;
            for (int k = 0; k < K; ++k) {
                const double t = (double)A[(size_t)m * K + k] * W[(size_t)n * K + k];
                s += t;
                a += std::fabs(t);
            }
            out[(size_t)m * N + n] = s;
            scale[(size_t)m * N + n] = a;
        }
}


// A fused matmul (matvec, the own kernel at some tiles) with every epilogue.
// `offset` floats in front of every buffer make them unaligned (scalar paths).
using FusedLaunch = std::function<int(Epilogue, float* out, const float* A, const float* W, const float* bias, const float* residual)>;
void check_fused(const std::string& what, int M, int N, int K, int offset, const FusedLaunch& launch) {
    std::vector<float> A = random_vec((size_t)M * K), W = random_vec((size_t)N * K), bias = random_vec(N), res = random_vec((size_t)M * N);
    std::vector<double> mm, scale;
    matmul_ref(A, W, M, N, K, mm, scale);
    const char* names[] = {"none", "bias", "bias+gelu", "bias+residual (in place)"};
    const Epilogue eps[] = {Epilogue::None, Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasResidual};
    for (int e = 0; e < 4; ++e) {
        Dev dA(A, offset), dW(W, offset), db(bias, offset), dres(res, offset), out((size_t)M * N, offset);
        float* o = e == 3 ? dres.p : out.p;  // residual epilogue writes over its own residual, as decoding does
        const int st = launch(eps[e], o, dA.p, dW.p, db.p, dres.p);
        std::vector<double> want((size_t)M * N), sc((size_t)M * N);
        for (size_t i = 0; i < want.size(); ++i) {
            double v = mm[i];
            if (e >= 1) v += bias[i % N];
            if (e == 2) v = gelu_ref(v);
            if (e == 3) v += res[i];
            want[i] = v;
            sc[i] = scale[i] + std::fabs(v);
        }
        expect(what + " " + names[e] + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                   (offset ? " unaligned" : ""),
               st, e == 3 ? dres.get() : out.get(), want, sc, 1e-5, 2e-6);
    }
}


// Causal attention over qkv (B,T,3C) -> (B,T,C), double precision.
void attention_ref(const std::vector<float>& qkv, int B, int T, int NH, int HS, std::vector<double>& out) {
    const int C = NH * HS;
    out.assign((size_t)B * T * C, 0.0);
    std::vector<double> p(T);
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h)
            for (int t1 = 0; t1 < T; ++t1) {
                const float* q = &qkv[((size_t)b * T + t1) * 3 * C + h * HS];
                double mx = -INFINITY;
                for (int t2 = 0; t2 <= t1; ++t2) {
                    const float* k = &qkv[((size_t)b * T + t2) * 3 * C + C + h * HS];
                    double s = 0;
                    for (int d = 0; d < HS; ++d) s += (double)q[d] * k[d];
                    p[t2] = s / std::sqrt((double)HS);
                    mx = std::fmax(mx, p[t2]);
                }
                double sum = 0;
                for (int t2 = 0; t2 <= t1; ++t2) sum += (p[t2] = std::exp(p[t2] - mx));
                for (int d = 0; d < HS; ++d) {
                    double acc = 0;
                    for (int t2 = 0; t2 <= t1; ++t2) acc += p[t2] * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + h * HS + d];
                    out[((size_t)b * T + t1) * C + h * HS + d] = acc / sum;
                }
            }
}


}  // namespace
