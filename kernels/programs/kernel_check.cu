// kernel_check: every kernel family, through its launcher and at the launch
// sizes of conf.cuh, against a CPU reference in double precision, at odd sizes
// (rows, channels and sequence lengths that are multiples of no tile) and on
// both the float4 and the scalar paths. Outputs are poisoned with NaN first, so
// an element a kernel never writes fails. Inputs are fresh random numbers.
// Passing means |gpu - ref| <= atol + rtol * scale for every element, where
// scale is |ref| (elementwise) or the sum of |terms| (reductions, dot products).
// Prints one line per check and a JSON summary; exit 1 if any check fails.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../attention.cuh"
#include "../encoder.cuh"
#include "../gelu.cuh"
#include "../kvcache.cuh"
#include "../layernorm.cuh"
#include "../matmul.cuh"
#include "../matvec.cuh"
#include "../prepare.cuh"
#include "../residual.cuh"
#include "../residual_layernorm.cuh"
#include "../softmax.cuh"

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

// ---------------------------------------------------------------------------

void check_encoder(int B, int T, int C, int start) {
    const int V = 101, maxT = T + start + 3;
    std::vector<float> wte = random_vec((size_t)V * C), wpe = random_vec((size_t)maxT * C);
    std::vector<int> tok(B * T);
    for (int& t : tok) t = rng() % V;
    int* dtok;
    int* dstart;
    cudaCheck(cudaMalloc(&dtok, tok.size() * 4));
    cudaCheck(cudaMalloc(&dstart, 4));
    cudaCheck(cudaMemcpy(dtok, tok.data(), tok.size() * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dstart, &start, 4, cudaMemcpyHostToDevice));
    Dev dwte(wte), dwpe(wpe), out((size_t)B * T * C);
    const int st = encoder_forward(out.p, dtok, dwte.p, dwpe.p, start ? dstart : nullptr, B, T, C, 0);
    std::vector<double> want((size_t)B * T * C);
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t)
            for (int c = 0; c < C; ++c)
                want[((size_t)b * T + t) * C + c] = (double)wte[(size_t)tok[b * T + t] * C + c] + wpe[(size_t)(start + t) * C + c];
    expect("encoder B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) + " start=" + std::to_string(start),
           st, out.get(), want, abs_of(want), 1e-6, 1e-6);
    cudaFree(dtok);
    cudaFree(dstart);
}

void check_layernorm(int N, int C, int offset) {
    std::vector<float> x = random_vec((size_t)N * C, 2.f, 4.f), w = random_vec(C, 0.5f, 1.5f), b = random_vec(C);
    Dev dx(x, offset), dw(w, offset), db(b, offset), out((size_t)N * C, offset);
    const int st = layernorm_forward(out.p, dx.p, dw.p, db.p, N, C, 1e-5f, 0);
    std::vector<double> want((size_t)N * C);
    for (int r = 0; r < N; ++r) layernorm_ref(&x[(size_t)r * C], w.data(), b.data(), C, 1e-5, &want[(size_t)r * C]);
    expect("layernorm N=" + std::to_string(N) + " C=" + std::to_string(C) + (offset ? " unaligned" : ""), st, out.get(), want,
           abs_of(want), 1e-4, 1e-4);
}

void check_residual_layernorm(int N, int C, bool with_bias, bool in_place) {
    std::vector<float> x = random_vec((size_t)N * C, -2.f, 2.f), y = random_vec((size_t)N * C), yb = random_vec(C),
                       w = random_vec(C, 0.5f, 1.5f), b = random_vec(C);
    Dev dx(x), dy(y), dyb(yb), dw(w), db(b), xo((size_t)N * C), ln((size_t)N * C);
    float* x_out = in_place ? dx.p : xo.p;
    const int st = residual_layernorm_forward(x_out, ln.p, dx.p, dy.p, with_bias ? dyb.p : nullptr, dw.p, db.p, N, C, 1e-5f, 0);
    std::vector<double> want_x((size_t)N * C), want_ln((size_t)N * C);
    std::vector<float> sum((size_t)N * C);
    for (size_t i = 0; i < sum.size(); ++i) {
        sum[i] = x[i] + y[i] + (with_bias ? yb[i % C] : 0.f);
        want_x[i] = (double)x[i] + y[i] + (with_bias ? yb[i % C] : 0.0);
    }
    for (int r = 0; r < N; ++r) layernorm_ref(&sum[(size_t)r * C], w.data(), b.data(), C, 1e-5, &want_ln[(size_t)r * C]);
    const std::string tag = " N=" + std::to_string(N) + " C=" + std::to_string(C) + (with_bias ? " bias" : "") + (in_place ? " in-place" : "");
    expect("residual_layernorm (sum)" + tag, st, in_place ? dx.get() : xo.get(), want_x, abs_of(want_x), 1e-5, 1e-5);
    expect("residual_layernorm (norm)" + tag, st, ln.get(), want_ln, abs_of(want_ln), 1e-4, 1e-4);
}

void check_residual_gelu(int N, int offset) {
    std::vector<float> a = random_vec(N, -3.f, 3.f), b = random_vec(N);
    Dev da(a, offset), db(b, offset), out(N, offset), g(N, offset);
    const int st = residual_forward(out.p, da.p, db.p, N, 0);
    const int sg = gelu_forward(g.p, da.p, N, 0);
    std::vector<double> want(N), want_g(N);
    for (int i = 0; i < N; ++i) { want[i] = (double)a[i] + b[i]; want_g[i] = gelu_ref(a[i]); }
    const std::string tag = " N=" + std::to_string(N) + (offset ? " unaligned" : "");
    expect("residual" + tag, st, out.get(), want, abs_of(want), 1e-6, 1e-6);
    expect("gelu" + tag, sg, g.get(), want_g, abs_of(want_g), 1e-6, 1e-5);
}

void check_prepare(int rows, int OC) {
    const size_t n = (size_t)rows * OC;
    std::vector<float> x = random_vec(n, -3.f, 3.f), bias = random_vec(OC), res = random_vec(n);
    const char* names[] = {"bias", "bias+gelu", "bias+residual"};
    const Epilogue eps[] = {Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasResidual};
    for (int e = 0; e < 3; ++e) {
        Dev out(x), db(bias), dr(res);
        const int st = prepare_forward(eps[e], out.p, db.p, dr.p, (int)n, OC, 0);
        std::vector<double> want(n);
        for (size_t i = 0; i < n; ++i) {
            double v = (double)x[i] + bias[i % OC];
            if (e == 1) v = gelu_ref(v);
            if (e == 2) v += res[i];
            want[i] = v;
        }
        expect(std::string("prepare ") + names[e] + " rows=" + std::to_string(rows) + " OC=" + std::to_string(OC), st, out.get(), want,
               abs_of(want), 1e-6, 1e-5);
    }
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

void check_matmul(MatmulImpl impl, const char* name, int M, int N, int K) {
    std::vector<float> A = random_vec((size_t)M * K), W = random_vec((size_t)N * K);
    Dev dA(A), dW(W), out((size_t)M * N);
    const int st = matmul_forward(impl, out.p, dA.p, dW.p, M, N, K, 0);
    std::vector<double> want, scale;
    matmul_ref(A, W, M, N, K, want, scale);
    expect(std::string("matmul ") + name + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K), st,
           out.get(), want, scale, 1e-5, 2e-6);
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

void check_matvec(int M, int N, int K) {
    check_fused("matvec", M, N, K, 0, [&](Epilogue e, float* o, const float* A, const float* W, const float* b, const float* r) {
        return matvec_forward(e, o, A, W, b, r, M, N, K, 0);
    });
}

// The decoding matvec (split-K inside a block) at conf.cuh's block and the
// launcher's split, and at other blocks with forced splits (every divisor of
// the block's warps, so strips that end mid-K and warps past N are covered).
void check_matvec_decode(int M, int N, int K, int offset) {
    check_fused("matvec_splitk", M, N, K, offset, [&](Epilogue e, float* o, const float* A, const float* W, const float* b,
                                                      const float* r) {
        return matvec_decode_forward(e, o, A, W, b, r, M, N, K, 0, RowNorm{}, KVWrite{});
    });
}
template <int BLOCK>
void check_matvec_split(int M, int N, int K, int split, int offset) {
    check_fused("matvec_splitk block " + std::to_string(BLOCK) + " split " + std::to_string(split), M, N, K, offset,
                [&](Epilogue e, float* o, const float* A, const float* W, const float* b, const float* r) {
                    return matvec_splitk_sized<BLOCK, MATVEC_MAX_ROWS>(e, o, A, W, b, r, M, N, K, 0, split);
                });
}

// The decoding matvec with the LayerNorm folded in (x rows with a large mean, as
// check_layernorm's), every epilogue, against LayerNorm then product in double.
template <int BLOCK>
void check_matvec_norm(int M, int N, int K, int split, int offset) {
    std::vector<float> x = random_vec((size_t)M * K, 2.f, 4.f), g = random_vec(K, 0.5f, 1.5f), gb = random_vec(K),
                       W = random_vec((size_t)N * K), bias = random_vec(N), res = random_vec((size_t)M * N);
    std::vector<double> xn((size_t)M * K);
    for (int r = 0; r < M; ++r) layernorm_ref(&x[(size_t)r * K], g.data(), gb.data(), K, 1e-5, &xn[(size_t)r * K]);
    const char* names[] = {"none", "bias", "bias+gelu", "bias+residual (in place)"};
    const Epilogue eps[] = {Epilogue::None, Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasResidual};
    for (int e = 0; e < 4; ++e) {
        Dev dx(x, offset), dg(g, offset), dgb(gb, offset), dW(W, offset), db(bias, offset), dres(res, offset),
            out((size_t)M * N, offset);
        float* o = e == 3 ? dres.p : out.p;
        const int st = split ? matvec_splitk_sized<BLOCK, MATVEC_MAX_ROWS>(eps[e], o, dx.p, dW.p, db.p, dres.p, M, N, K, 0, split,
                                                                          RowNorm{dg.p, dgb.p, 1e-5f})
                             : matvec_decode_forward(eps[e], o, dx.p, dW.p, db.p, dres.p, M, N, K, 0, RowNorm{dg.p, dgb.p, 1e-5f}, KVWrite{});
        std::vector<double> want((size_t)M * N), sc((size_t)M * N);
        for (int r = 0; r < M; ++r)
            for (int n = 0; n < N; ++n) {
                double v = 0, a = 0;
                for (int k = 0; k < K; ++k) {
                    const double t = xn[(size_t)r * K + k] * W[(size_t)n * K + k];
                    v += t;
                    a += std::fabs(t);
                }
                if (e >= 1) v += bias[n];
                if (e == 2) v = gelu_ref(v);
                if (e == 3) v += res[(size_t)r * N + n];
                want[(size_t)r * N + n] = v;
                sc[(size_t)r * N + n] = a + std::fabs(v);
            }
        expect("matvec_splitk layernorm block " + std::to_string(BLOCK) + " split " + std::to_string(split) + " " + names[e] +
                   " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + (offset ? " unaligned" : ""),
               st, e == 3 ? dres.get() : out.get(), want, sc, 1e-5, 1e-5);
    }
}

// The decoding LM head's token pick (TokenPick): the LayerNorm-ed matvec with no
// epilogue also picks each row's next token, as argmax does on the logits it writes:
// a planted tie (two equal columns, the largest by far: the first must win, wherever
// the blocks finish) on `tie` rows, the first maximum of the GPU's own logits on the
// others (token_pick_forward after it); the pick appended at pos + 1, the position moved
// on, best left at zero. Twice, the second time at the position the first left.
template <int BLOCK>
void check_token_pick(int M, int N, int K, int split, int tie_at) {
    std::vector<float> x = random_vec((size_t)M * K, 2.f, 4.f), g = random_vec(K, 0.5f, 1.5f), gb = random_vec(K),
                       W = random_vec((size_t)N * K);
    std::vector<double> xn(K);
    layernorm_ref(x.data(), g.data(), gb.data(), K, 1e-5, xn.data());  // row 0's: its tie's columns are 4 x its LayerNorm
    for (int k = 0; k < K; ++k) W[(size_t)tie_at * K + k] = W[(size_t)(N - 1) * K + k] = (float)(4.0 * xn[k]);
    const int maxT = 9, start = 3;
    Dev dx(x), dg(g), dgb(gb), dW(W), out((size_t)M * N);
    int *dnext, *dseq, *dpos;
    unsigned long long* best;
    cudaCheck(cudaMalloc(&dnext, M * 4));
    cudaCheck(cudaMalloc(&dseq, (size_t)M * maxT * 4));
    cudaCheck(cudaMalloc(&dpos, 4));
    cudaCheck(cudaMalloc(&best, M * sizeof(unsigned long long)));
    cudaCheck(cudaMemset(dseq, 0xff, (size_t)M * maxT * 4));
    cudaCheck(cudaMemcpy(dpos, &start, 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(best, 0, M * sizeof(unsigned long long)));
    for (int launch = 0; launch < 2; ++launch) {
        const TokenPick pick{best, dnext, dseq, dpos, maxT};
        const int st = matvec_splitk_sized<BLOCK, MATVEC_MAX_ROWS>(Epilogue::None, out.p, dx.p, dW.p, nullptr, nullptr, M, N, K,
                                                                   0, split, RowNorm{dg.p, dgb.p, 1e-5f}, KVWrite{}, pick) ||
                       token_pick_forward(pick, M, 0);
        const std::vector<float> logits = out.get();
        std::vector<int> next(M), seq((size_t)M * maxT);
        int pos_after = -1;
        unsigned long long left[MATVEC_MAX_ROWS] = {};
        cudaCheck(cudaMemcpy(next.data(), dnext, M * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(seq.data(), dseq, seq.size() * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(&pos_after, dpos, 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(left, best, M * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        std::vector<float> got;
        std::vector<double> want;
        for (int r = 0; r < M; ++r) {
            int first_max = 0;  // the first maximum of the logits the kernel wrote (torch.argmax's)
            for (int n = 1; n < N; ++n)
                if (logits[(size_t)r * N + n] > logits[(size_t)r * N + first_max]) first_max = n;
            if (r == 0) first_max = tie_at;  // and not N - 1, its equal
            got.insert(got.end(), {(float)next[r], (float)seq[(size_t)r * maxT + start + launch + 1]});
            want.insert(want.end(), {(double)first_max, (double)first_max});
        }
        got.push_back((float)pos_after);
        want.push_back(start + launch + 1);
        float leftover = 0;
        for (int i = 0; i < M; ++i) leftover += left[i] != 0;
        got.push_back(leftover);
        want.push_back(0.0);
        expect("matvec_splitk LM head + token_pick block " + std::to_string(BLOCK) + " split " + std::to_string(split) + " M=" +
                   std::to_string(M) + " N=" + std::to_string(N) + " launch " + std::to_string(launch + 1),
               st, got, want, std::vector<double>(got.size(), 0.0), 0.0, 0.0);
    }
    for (void* p : {(void*)dnext, (void*)dseq, (void*)dpos, (void*)best}) cudaFree(p);
}

// The decoding qkv matvec's KV-cache write: with a KVWrite, the k and v thirds
// of its output (bias added) must land in the caches (B, NH, maxT, HS) at
// position pos, equal to the output it stores, and the q third nowhere.
void check_matvec_kv(int M, int NH, int HS, int K, int pos, int offset) {
    const int C = NH * HS, N = 3 * C, maxT = pos + 3;
    std::vector<float> A = random_vec((size_t)M * K), W = random_vec((size_t)N * K), bias = random_vec(N);
    std::vector<double> mm, scale;
    matmul_ref(A, W, M, N, K, mm, scale);
    Dev dA(A, offset), dW(W, offset), db(bias, offset), out((size_t)M * N, offset), kc((size_t)M * NH * maxT * HS),
        vc((size_t)M * NH * maxT * HS);
    int* dpos;
    cudaCheck(cudaMalloc(&dpos, 4));
    cudaCheck(cudaMemcpy(dpos, &pos, 4, cudaMemcpyHostToDevice));
    const int st = matvec_decode_forward(Epilogue::Bias, out.p, dA.p, dW.p, db.p, nullptr, M, N, K, 0, RowNorm{},
                                         KVWrite{kc.p, vc.p, dpos, NH, maxT});
    const std::vector<float> o = out.get(), k = kc.get(), v = vc.get();
    std::vector<double> want((size_t)M * N), sc((size_t)M * N);
    for (size_t i = 0; i < want.size(); ++i) {
        want[i] = mm[i] + bias[i % N];
        sc[i] = scale[i] + std::fabs(want[i]);
    }
    const std::string tag = " M=" + std::to_string(M) + " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS) + " K=" +
                            std::to_string(K) + " pos=" + std::to_string(pos) + (offset ? " unaligned" : "");
    expect("matvec_splitk bias + kv write (output)" + tag, st, o, want, sc, 1e-5, 2e-6);
    // The cache slots against the output the kernel stored: the very same floats.
    std::vector<float> got;
    std::vector<double> same;
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < C; ++c) {
            const size_t slot = (((size_t)r * NH + c / HS) * maxT + pos) * HS + c % HS;
            got.push_back(k[slot]);
            same.push_back(o[(size_t)r * N + C + c]);
            got.push_back(v[slot]);
            same.push_back(o[(size_t)r * N + 2 * C + c]);
        }
    expect("matvec_splitk bias + kv write (cache at pos)" + tag, st, got, same, std::vector<double>(same.size(), 0.0), 0.0, 0.0);
    // Every other slot keeps its NaN poison.
    size_t touched = 0;
    for (size_t i = 0; i < k.size(); ++i) touched += !std::isnan(k[i]) + !std::isnan(v[i]);
    expect("matvec_splitk bias + kv write (nothing else written)" + tag, st, {(float)touched},
           {(double)(2 * (size_t)M * C)}, {0.0}, 0.0, 0.0);
    cudaFree(dpos);
}

// The decoding qkv matvec with each head's attention in its tail (KVWrite::attention):
// LayerNorm, q k v plus bias, k and v into the cache at pos, then attention of q over
// positions 0..pos (earlier positions: random cache rows) against double precision.
// Launched three times on the same counters, as a graph's replays are, which the
// blocks that ran a head must leave at zero. `split` 0: the launcher's.
template <int BLOCK>
void check_matvec_attention(int M, int NH, int HS, int K, int pos, int split, int offset) {
    const int C = NH * HS, N = 3 * C, maxT = pos + 2;
    const float w = 1.0f / std::sqrt((float)K);  // q, k and v of order 1, so the softmax is not one-hot
    std::vector<float> x = random_vec((size_t)M * K, 2.f, 4.f), g = random_vec(K, 0.5f, 1.5f), gb = random_vec(K),
                       W = random_vec((size_t)N * K, -w, w), bias = random_vec(N),
                       kh = random_vec((size_t)M * NH * maxT * HS), vh = random_vec((size_t)M * NH * maxT * HS);
    std::vector<double> xn((size_t)M * K), qkv((size_t)M * N), want((size_t)M * C);
    for (int r = 0; r < M; ++r) layernorm_ref(&x[(size_t)r * K], g.data(), gb.data(), K, 1e-5, &xn[(size_t)r * K]);
    for (int r = 0; r < M; ++r)
        for (int n = 0; n < N; ++n) {
            double v = bias[n];
            for (int k = 0; k < K; ++k) v += xn[(size_t)r * K + k] * W[(size_t)n * K + k];
            qkv[(size_t)r * N + n] = v;
        }
    std::vector<double> p(pos + 1);
    for (int r = 0; r < M; ++r)
        for (int h = 0; h < NH; ++h) {
            const double* q = &qkv[(size_t)r * N + h * HS];
            const size_t head = ((size_t)r * NH + h) * maxT * HS;
            auto key = [&](int t, int d) { return t == pos ? qkv[(size_t)r * N + C + h * HS + d] : (double)kh[head + (size_t)t * HS + d]; };
            auto val = [&](int t, int d) { return t == pos ? qkv[(size_t)r * N + 2 * C + h * HS + d] : (double)vh[head + (size_t)t * HS + d]; };
            double mx = -INFINITY, sum = 0;
            for (int t = 0; t <= pos; ++t) {
                double s = 0;
                for (int d = 0; d < HS; ++d) s += q[d] * key(t, d);
                mx = std::fmax(mx, p[t] = s / std::sqrt((double)HS));
            }
            for (int t = 0; t <= pos; ++t) sum += (p[t] = std::exp(p[t] - mx));
            for (int d = 0; d < HS; ++d) {
                double o = 0;
                for (int t = 0; t <= pos; ++t) o += p[t] * val(t, d);
                want[(size_t)r * C + h * HS + d] = o / sum;
            }
        }
    Dev dx(x, offset), dg(g, offset), dgb(gb, offset), dW(W, offset), db(bias, offset), kc(kh), vc(vh);
    int* dpos;
    unsigned int* counters;
    cudaCheck(cudaMalloc(&dpos, 4));
    cudaCheck(cudaMemcpy(dpos, &pos, 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMalloc(&counters, NH * sizeof(unsigned int)));
    cudaCheck(cudaMemset(counters, 0, NH * sizeof(unsigned int)));
    const std::string tag = " block " + std::to_string(BLOCK) + " split " + std::to_string(split) + " M=" + std::to_string(M) +
                            " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS) + " K=" + std::to_string(K) + " pos=" +
                            std::to_string(pos) + (offset ? " unaligned" : "");
    for (int rep = 0; rep < 3; ++rep) {
        Dev out((size_t)M * N, offset), att((size_t)M * C);
        const int st = matvec_splitk_sized<BLOCK, MATVEC_MAX_ROWS>(Epilogue::Bias, out.p, dx.p, dW.p, db.p, nullptr, M, N, K, 0,
                                                                   split, RowNorm{dg.p, dgb.p, 1e-5f},
                                                                   KVWrite{kc.p, vc.p, dpos, NH, maxT, att.p, counters});
        expect("matvec_splitk layernorm + qkv + attention" + tag + " run " + std::to_string(rep + 1), st, att.get(), want,
               std::vector<double>(want.size(), 1.0), 1e-5, 1e-5);
    }
    std::vector<unsigned int> left(NH);
    cudaCheck(cudaMemcpy(left.data(), counters, NH * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    std::vector<float> got(left.begin(), left.end());
    expect("matvec_splitk attention counters left at zero" + tag, 0, got, std::vector<double>(NH, 0.0),
           std::vector<double>(NH, 0.0), 0.0, 0.0);
    cudaFree(dpos);
    cudaFree(counters);
}

// The own kernel at tiles other than conf.cuh's (kernel_bench and matmul_tiles
// time such), with `splits` K slices (0: the launcher's choice).
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int ST>
void check_own_tiles(int M, int N, int K, int splits, int offset) {
    char what[96];
    snprintf(what, sizeof(what), "matmul own %dx%dx%d w%dx%d t%dx%d s%d split %d", BM, BN, BK, WM, WN, TM, TN, ST, splits);
    check_fused(what, M, N, K, offset, [&](Epilogue e, float* o, const float* A, const float* W, const float* b, const float* r) {
        return matmul_own_sized<BM, BN, BK, WM, WN, TM, TN, ST>(e, o, A, W, b, r, M, N, K, 0, splits);
    });
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

void check_attention(int B, int T, int NH, int HS) {
    const int C = NH * HS;
    std::vector<float> qkv = random_vec((size_t)B * T * 3 * C, -2.f, 2.f);
    std::vector<double> want;
    attention_ref(qkv, B, T, NH, HS, want);
    std::vector<double> scale(want.size(), 1.0);
    const std::string tag = " B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS);
    Dev dqkv(qkv);
    {
        Dev pre((size_t)B * NH * T * T), att((size_t)B * NH * T * T), out((size_t)B * T * C);
        int st = attention_qk_forward(pre.p, dqkv.p, B, T, NH, HS, 0);
        st = st ? st : softmax_forward(att.p, pre.p, B * NH * T, T, 0);
        st = st ? st : attention_av_forward(out.p, att.p, dqkv.p, B, T, NH, HS, 0);
        expect("attention reference (qk+softmax+av)" + tag, st, out.get(), want, scale, 1e-5, 1e-5);
    }
    if (attention_flash_supports(HS)) {
        Dev out((size_t)B * T * C);
        const int st = attention_flash_forward(out.p, dqkv.p, B, T, NH, HS, 0);
        expect("attention flash" + tag, st, out.get(), want, scale, 1e-5, 1e-5);
    } else {
        printf("%-52s SKIP  (head size not built for the flash kernel)\n", ("attention flash" + tag).c_str());
    }
}

// The decoding path: kv_cache_write of T positions, then one query at position
// T-1 against the cache must equal the last row of full causal attention.
void check_decode(int B, int T, int NH, int HS) {
    const int C = NH * HS, maxT = T + 5;
    std::vector<float> qkv = random_vec((size_t)B * T * 3 * C, -2.f, 2.f);
    std::vector<double> full;
    attention_ref(qkv, B, T, NH, HS, full);
    Dev dqkv(qkv), kc((size_t)B * NH * maxT * HS), vc((size_t)B * NH * maxT * HS);
    int st = kv_cache_write_forward(kc.p, vc.p, dqkv.p, nullptr, B, T, NH, HS, maxT, 0);
    // The last position's q, as decoding sees it: a (B, 1, 3C) row.
    std::vector<float> last((size_t)B * 3 * C);
    for (int b = 0; b < B; ++b)
        memcpy(&last[(size_t)b * 3 * C], &qkv[((size_t)b * T + T - 1) * 3 * C], 3 * C * sizeof(float));
    Dev dlast(last), out((size_t)B * C);
    int* dpos;
    const int pos = T - 1;
    cudaCheck(cudaMalloc(&dpos, 4));
    cudaCheck(cudaMemcpy(dpos, &pos, 4, cudaMemcpyHostToDevice));
    st = st ? st : attention_decode_forward(out.p, dlast.p, kc.p, vc.p, dpos, B, NH, HS, maxT, 0);
    std::vector<double> want((size_t)B * C);
    for (int b = 0; b < B; ++b)
        for (int c = 0; c < C; ++c) want[(size_t)b * C + c] = full[((size_t)b * T + T - 1) * C + c];
    expect("kv_cache_write + attention_decode B=" + std::to_string(B) + " T=" + std::to_string(T) + " HS=" + std::to_string(HS), st,
           out.get(), want, std::vector<double>(want.size(), 1.0), 1e-5, 1e-5);
    // The split kernel at conf.cuh's sizes and others, each launched three times on
    // the same counters (as graph replays are): the last block must leave them zero.
    const std::string tag = " B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS);
    Dev scratch((size_t)B * NH * maxT * (HS + 2));  // enough for any chunk size (at most maxT chunks)
    unsigned int* counters;
    cudaCheck(cudaMalloc(&counters, (size_t)B * NH * sizeof(unsigned int)));
    cudaCheck(cudaMemset(counters, 0, (size_t)B * NH * sizeof(unsigned int)));
    auto split_check = [&](const std::string& what, auto launch) {
        for (int rep = 0; rep < 3; ++rep) {
            Dev o((size_t)B * C);
            const int s2 = launch(o.p);
            expect(what + tag + " run " + std::to_string(rep + 1), s2, o.get(), want, std::vector<double>(want.size(), 1.0),
                   1e-5, 1e-5);
        }
        std::vector<unsigned int> left((size_t)B * NH);
        cudaCheck(cudaMemcpy(left.data(), counters, left.size() * sizeof(unsigned int), cudaMemcpyDeviceToHost));
        std::vector<float> got(left.begin(), left.end());
        expect(what + " counters left at zero" + tag, 0, got, std::vector<double>(got.size(), 0.0),
               std::vector<double>(got.size(), 0.0), 0.0, 0.0);
    };
    split_check("attention_decode_split", [&](float* o) {
        return attention_decode_split_forward(o, dlast.p, kc.p, vc.p, dpos, scratch.p, counters, B, NH, HS, maxT, 0);
    });
    split_check("attention_decode_split block 32 chunk 32", [&](float* o) {
        return attention_decode_split_sized<32, 32>(o, dlast.p, kc.p, vc.p, dpos, scratch.p, counters, B, NH, HS, maxT, 0);
    });
    split_check("attention_decode_split block 128 chunk 5", [&](float* o) {
        return attention_decode_split_sized<128, 5>(o, dlast.p, kc.p, vc.p, dpos, scratch.p, counters, B, NH, HS, maxT, 0);
    });
    split_check("attention_decode_split block 1024 chunk 1000", [&](float* o) {
        return attention_decode_split_sized<1024, 1000>(o, dlast.p, kc.p, vc.p, dpos, scratch.p, counters, B, NH, HS, maxT, 0);
    });
    cudaFree(counters);
    // argmax with a planted tie in different parts of a row (at 1024 threads, 4 parts): the first
    // maximum must win; then at 64 threads (the most parts, 32) moving the position on, which
    // must leave every counter at zero.
    const int V = 50257;
    std::vector<float> logits = random_vec((size_t)B * V);
    for (int b = 0; b < B; ++b) {
        logits[(size_t)b * V + 777 + b] = 5.f;
        logits[(size_t)b * V + 40000] = 5.f;
    }
    Dev dl(logits);
    int *dnext, *dseq;
    ArgmaxScratch am;
    const size_t am_counters = (B + 1) * sizeof(unsigned int);
    cudaCheck(cudaMalloc(&dnext, B * 4));
    cudaCheck(cudaMalloc(&dseq, (size_t)B * maxT * 4));
    cudaCheck(cudaMalloc(&am.value, argmax_scratch_slots(B) * sizeof(float)));
    cudaCheck(cudaMalloc(&am.index, argmax_scratch_slots(B) * sizeof(int)));
    cudaCheck(cudaMalloc(&am.counters, am_counters));
    cudaCheck(cudaMemset(am.counters, 0, am_counters));
    auto argmax_check = [&](const std::string& what, int want_pos, auto&& launch) {
        cudaCheck(cudaMemset(dseq, 0xff, (size_t)B * maxT * 4));
        int st = launch();
        std::vector<int> next(B), seq((size_t)B * maxT), left(B + 1);
        int pos_after = -1;
        cudaCheck(cudaMemcpy(next.data(), dnext, B * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(seq.data(), dseq, seq.size() * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(left.data(), am.counters, am_counters, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(&pos_after, dpos, 4, cudaMemcpyDeviceToHost));
        std::vector<float> got(2 * B + 2);
        std::vector<double> want2(2 * B + 2, 0.0);
        for (int b = 0; b < B; ++b) {
            got[2 * b] = (float)next[b];
            got[2 * b + 1] = (float)seq[(size_t)b * maxT + pos + 1];
            want2[2 * b] = want2[2 * b + 1] = 777 + b;
        }
        got[2 * B] = (float)pos_after;
        want2[2 * B] = want_pos;
        for (int c : left) got[2 * B + 1] += (float)c;  // counters left: 0
        expect(what + " B=" + std::to_string(B), st, got, want2, std::vector<double>(got.size(), 0.0), 0.0, 0.0);
    };
    argmax_check("argmax (first of tied maxima, parts of 1024 threads)", pos, [&] {
        return argmax_forward(dnext, dseq, dpos, dl.p, B, V, V, maxT, am, false, 0);
    });
    argmax_check("argmax (first of tied maxima, 32 parts of 64 threads) advancing the position, counters left at zero",
                 pos + 1, [&] { return argmax_sized<64>(dnext, dseq, dpos, dl.p, B, V, V, maxT, am, true, 0); });
    cudaFree(dpos);
    cudaFree(dnext);
    cudaFree(dseq);
    cudaFree(am.value);
    cudaFree(am.index);
    cudaFree(am.counters);
}

}  // namespace

int main() {
    int dev = 0;
    cudaDeviceProp prop{};
    if (cudaCheck(cudaGetDevice(&dev)) || cudaCheck(cudaGetDeviceProperties(&prop, dev))) return 2;
    printf("kernel_check on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    check_encoder(3, 37, 99, 0);
    check_encoder(2, 64, 768, 5);
    check_layernorm(37, 99, 0);
    check_layernorm(64, 768, 0);
    check_layernorm(5, 768, 1);
    check_residual_layernorm(37, 99, true, false);
    check_residual_layernorm(64, 768, true, true);
    check_residual_layernorm(9, 768, false, false);
    check_residual_gelu(1027, 0);
    check_residual_gelu(1 << 20, 0);
    check_residual_gelu(4099, 1);
    check_prepare(37, 99);
    check_prepare(64, 2304);
    for (auto [impl, name] : {std::pair{MatmulImpl::Own, "own"}, std::pair{MatmulImpl::Tiled, "tiled"}, std::pair{MatmulImpl::Cublas, "cublas"}}) {
        if (impl == MatmulImpl::Cublas && !matmul_has_cublas()) { printf("%-52s SKIP  (built without cuBLAS)\n", "matmul cublas"); continue; }
        check_matmul(impl, name, 37, 99, 67);
        check_matmul(impl, name, 130, 288, 96);
        check_matmul(impl, name, 256, 2304, 768);
        check_matmul(impl, name, 67, 50257, 96);
        check_matmul(impl, name, 64, 768, 3072);   // few blocks: the own matmul splits K
        check_matmul(impl, name, 17, 2304, 100);   // K not a multiple of 4 (float4 rows misaligned)
    }
    // The own kernel's epilogues, at conf.cuh's tiles and at others, whole and split along K.
    check_fused("matmul own (conf.cuh tiles)", 130, 288, 96, 0, [&](Epilogue e, float* o, const float* A, const float* W,
                                                                     const float* b, const float* r) {
        return matmul_fused_forward(e, o, A, W, b, r, 130, 288, 96, 0);
    });
    check_own_tiles<128, 128, 8, 64, 32, 8, 8, 3>(131, 257, 75, 1, 0);
    check_own_tiles<128, 128, 8, 64, 32, 8, 8, 3>(131, 257, 75, 3, 1);  // split-K: the epilogue runs in the reduction
    check_own_tiles<128, 128, 16, 64, 32, 8, 8, 4>(200, 300, 1000, 1, 0);
    check_own_tiles<128, 128, 32, 64, 32, 8, 8, 2>(130, 140, 1001, 0, 1);
    check_own_tiles<128, 256, 16, 64, 64, 8, 16, 3>(64, 768, 3072, 0, 0);
    check_own_tiles<64, 64, 8, 32, 32, 4, 8, 3>(67, 99, 67, 0, 1);
    check_own_tiles<128, 64, 8, 64, 32, 8, 8, 3>(257, 130, 96, 2, 0);
    check_own_tiles<128, 256, 8, 64, 64, 8, 16, 3>(129, 260, 40, 1, 0);
    check_own_tiles<256, 128, 8, 64, 64, 8, 16, 3>(300, 129, 33, 1, 1);
    check_matvec(1, 99, 67);
    check_matvec(3, 768, 768);
    check_matvec(1, 2304, 768);
    check_matvec_decode(1, 2304, 768, 0);   // GPT-2's decoding shapes at the launcher's split
    check_matvec_decode(1, 768, 3072, 0);
    check_matvec_decode(1, 3072, 768, 0);
    check_matvec_decode(1, 50257, 768, 0);
    check_matvec_decode(3, 769, 1000, 0);
    check_matvec_decode(1, 99, 67, 1);      // K not a multiple of 4, unaligned: the scalar path
    check_matvec_split<256>(2, 101, 3072, 8, 0);
    check_matvec_split<256>(1, 37, 516, 4, 0);   // 129 float4s: strips of 128 leave one
    check_matvec_split<256>(1, 37, 515, 2, 1);
    check_matvec_split<96>(2, 50, 768, 3, 0);    // three warps, one column a block
    check_matvec_split<64>(1, 3, 2000, 1, 0);    // fewer columns than a block's warps
    check_matvec_split<1024>(1, 77, 4096, 32, 0);
    check_matvec_norm<MATVEC_DECODE_BLOCK_SIZE>(1, 2304, 768, 0, 0);   // ln1 -> qkv, the launcher's split
    check_matvec_norm<MATVEC_DECODE_BLOCK_SIZE>(1, 50257, 768, 0, 0);  // lnf -> LM head
    check_matvec_norm<MATVEC_DECODE_BLOCK_SIZE>(3, 301, 768, 0, 0);
    check_matvec_norm<256>(2, 37, 516, 4, 0);
    check_matvec_norm<256>(1, 37, 516, 1, 0);    // one row, a warp a column: each warp LayerNorms it (129 float4s)
    check_matvec_norm<64>(1, 13, 200, 1, 0);     // 50 float4s: most lanes hold one or two
    check_matvec_norm<96>(1, 50, 99, 3, 1);                          // the scalar path, three warps a column
    check_matvec_norm<32>(5, 13, 200, 1, 0);
    check_token_pick<MATVEC_DECODE_BLOCK_SIZE>(1, 50257, 768, 0, 777);   // GPT-2 124M's LM head, the launcher's split
    check_token_pick<MATVEC_DECODE_BLOCK_SIZE>(3, 50257, 768, 0, 40000);
    check_token_pick<256>(2, 1001, 200, 2, 0);                           // the tie at the first column, two warps a column
    check_token_pick<64>(1, 37, 768, 1, 5);                              // a block of two columns
    check_matvec_kv(1, 12, 64, 768, 70, 0);   // GPT-2 124M's qkv
    check_matvec_kv(3, 3, 32, 96, 0, 0);      // the odd preset's heads, three rows
    check_matvec_kv(2, 5, 20, 99, 9, 1);      // K not a multiple of 4, unaligned
    check_matvec_attention<MATVEC_DECODE_BLOCK_SIZE>(1, 12, 64, 768, 70, 0, 0);  // GPT-2 124M's qkv, the launcher's split
    check_matvec_attention<MATVEC_DECODE_BLOCK_SIZE>(1, 12, 64, 768, 0, 0, 0);   // the first position: one key
    check_matvec_attention<256>(1, 12, 64, 768, 300, 2, 0);  // more keys than a block's warps take at once, two warps a column
    check_matvec_attention<96>(3, 5, 20, 99, 9, 1, 1);       // three columns a block straddle heads of 20; scalar path
    check_matvec_attention<1024>(2, 4, 128, 512, 40, 1, 0);  // 32 columns a block, the widest head
    check_matvec_attention<32>(1, 3, 16, 64, 17, 1, 0);      // one warp: one column a block
    check_attention(2, 37, 3, 32);
    check_attention(2, 130, 3, 64);
    check_attention(1, 200, 2, 64);
    check_attention(1, 67, 2, 48);
    check_decode(1, 37, 3, 32);
    check_decode(2, 130, 2, 64);
    check_decode(1, 1, 12, 64);     // the first position: one chunk, written directly
    check_decode(1, 32, 12, 64);    // one whole default chunk
    check_decode(1, 33, 12, 64);    // a second chunk of one key
    check_decode(1, 500, 12, 64);
    check_decode(3, 70, 2, 40);     // a head size that is no multiple of 32
    printf("{\"schema\": \"engine-kernel-check/1\", \"device\": \"%s\", \"checks\": %d, \"failures\": %d, \"results\": [%s\n]}\n", prop.name,
           checks, failures, json_rows.c_str());
    fprintf(stderr, "%s: %d of %d checks failed\n", failures ? "FAIL" : "PASS", failures, checks);
    return failures ? 1 : 0;
}
