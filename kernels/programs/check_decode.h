// check_decode.h: kernel_check's checks of the decoding kernels (included by
// kernel_check.cu only): the split-K matvec alone, with the LayerNorm, the LM head's
// token pick, the KV-cache write and the attention folded in; attention against the
// cache (one block a head, and split over blocks); argmax.
#pragma once
#include "../attention_decode.cuh"
#include "../kvcache.cuh"
#include "../matvec.cuh"
#include "check_support.h"

namespace {

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
