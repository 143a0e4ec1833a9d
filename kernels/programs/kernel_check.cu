// kernel_check: every kernel family, through its launcher and at the launch
// sizes of conf.cuh, against a CPU reference in double precision, at odd sizes
// (rows, channels and sequence lengths that are multiples of no tile) and on
// both the float4 and the scalar paths. Outputs are poisoned with NaN first, so
// an element a kernel never writes fails. Inputs are fresh random numbers.
// Passing means |gpu - ref| <= atol + rtol * scale for every element, where
// scale is |ref| (elementwise) or the sum of |terms| (reductions, dot products).
// Prints one line per check and a JSON summary; exit 1 if any check fails.
// The scaffolding and shared references are check_support.h's, the decoding
// kernels' checks check_decode.h's.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../attention.cuh"
#include "../attention_decode.cuh"
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

#include "check_decode.h"
#include "check_support.h"

namespace {

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

void check_matmul(MatmulImpl impl, const char* name, int M, int N, int K) {
    std::vector<float> A = random_vec((size_t)M * K), W = random_vec((size_t)N * K);
    Dev dA(A), dW(W), out((size_t)M * N);
    const int st = matmul_forward(impl, out.p, dA.p, dW.p, M, N, K, 0);
    std::vector<double> want, scale;
    matmul_ref(A, W, M, N, K, want, scale);
    expect(std::string("matmul ") + name + " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K), st,
           out.get(), want, scale, 1e-5, 2e-6);
}


void check_matvec(int M, int N, int K) {
    check_fused("matvec", M, N, K, 0, [&](Epilogue e, float* o, const float* A, const float* W, const float* b, const float* r) {
        return matvec_forward(e, o, A, W, b, r, M, N, K, 0);
    });
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


// The tf32x3 kernel at tiles other than conf.cuh's (matmul_tiles times such), with `splits` K slices.
template <int BM, int BN, int BK, int WM, int WN, int ST>
void check_tf32x3_tiles(int M, int N, int K, int splits) {
    char what[96];
    snprintf(what, sizeof(what), "matmul tf32x3 %dx%dx%d w%dx%d s%d split %d", BM, BN, BK, WM, WN, ST, splits);
    check_fused(what, M, N, K, 0, [&](Epilogue e, float* o, const float* A, const float* W, const float* b, const float* r) {
        return matmul_tf32x3_sized<BM, BN, BK, WM, WN, ST>(e, o, A, W, b, r, M, N, K, 0, splits);
    });
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
    for (auto [impl, name] : {std::pair{MatmulImpl::Own, "own"}, std::pair{MatmulImpl::Tf32x3, "tf32x3"}, std::pair{MatmulImpl::Tiled, "tiled"},
                              std::pair{MatmulImpl::Cublas, "cublas"}}) {
        if (impl == MatmulImpl::Cublas && !matmul_has_cublas()) { printf("%-52s SKIP  (built without cuBLAS)\n", "matmul cublas"); continue; }
        check_matmul(impl, name, 37, 99, 67);
        check_matmul(impl, name, 130, 288, 96);
        check_matmul(impl, name, 256, 2304, 768);
        check_matmul(impl, name, 67, 50257, 96);
        check_matmul(impl, name, 64, 768, 3072);   // few blocks: the own matmul splits K
        check_matmul(impl, name, 17, 2304, 100);
        check_matmul(impl, name, 19, 300, 98);     // K not a multiple of 4: rows misaligned (tf32x3 runs the SIMT kernel)
    }
    // The own kernel's epilogues, at conf.cuh's tiles and at others, whole and split along K.
    check_fused("matmul own (conf.cuh tiles)", 130, 288, 96, 0, [&](Epilogue e, float* o, const float* A, const float* W,
                                                                     const float* b, const float* r) {
        return matmul_fused_forward(MatmulImpl::Own, e, o, A, W, b, r, 130, 288, 96, 0);
    });
    for (int offset : {0, 1})   // 1: operands not 16-byte aligned, so the SIMT kernel stands in
        check_fused("matmul tf32x3 (conf.cuh tiles)", 130, 288, 96, offset, [&](Epilogue e, float* o, const float* A,
                                                                               const float* W, const float* b, const float* r) {
            return matmul_fused_forward(MatmulImpl::Tf32x3, e, o, A, W, b, r, 130, 288, 96, 0);
        });
    check_tf32x3_tiles<128, 128, 32, 64, 32, 4>(131, 257, 76, 1);
    check_tf32x3_tiles<128, 128, 32, 64, 32, 4>(131, 257, 76, 3);  // split-K: the epilogue runs in the reduction
    check_tf32x3_tiles<64, 64, 32, 32, 32, 4>(200, 300, 1000, 0);
    check_tf32x3_tiles<128, 128, 16, 64, 32, 3>(64, 768, 3072, 0);
    check_tf32x3_tiles<128, 128, 32, 32, 64, 3>(37, 99, 68, 2);
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
