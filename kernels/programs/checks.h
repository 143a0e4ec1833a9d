// checks.h: the engine's checks against transformers' reference outputs
// (reference.bin, from `python -m gpt2_engine.export`), shared by the programs:
//
//   check_logits    the forward pass on the reference tokens for each matmul x
//                   fusion x attention path, every logit within atol of
//                   transformers' (NaN fails): gpt2_verify, gpt2_forward --ref
//   start_decoding, prefill
//                   greedy decoding's first steps (the prompt into device memory;
//                   the prompt through the forward pass, filling the KV cache, and
//                   the first token): gpt2_generate runs them before (--prefill:
//                   inside) each timed iteration, greedy_tokens runs them
//   greedy_tokens   n_new tokens of greedy decoding, one direct decoding step per
//                   token (the kernels a CUDA graph of the step would replay):
//                   gpt2_forward --ref compares them with transformers' greedy tokens
//
// gpt2_forward --ref runs both before it times, so a sweep checks and measures a
// configuration in one process and one weight load.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../common.cuh"
#include "../gpt2.h"
#include "../launchers.h"

// One path's logits against the reference.
struct LogitCheck {
    EngineOptions path;
    double max_abs_err = 0, max_rel_err = 0;
    size_t bad = 0, worst_index = 0;
    bool pass = false;
};

// Every path this build has: the matmuls (cuBLAS when linked), fusions and attentions.
inline std::vector<EngineOptions> all_paths() {
    std::vector<MatmulImpl> matmuls = {MatmulImpl::Own, MatmulImpl::Tf32x3, MatmulImpl::Tiled};
    if (matmul_has_cublas()) matmuls.push_back(MatmulImpl::Cublas);
    std::vector<EngineOptions> out;
    for (MatmulImpl mm : matmuls)
        for (Fusion fu : {Fusion::None, Fusion::Prepare, Fusion::Full})
            for (AttentionImpl at : {AttentionImpl::Flash, AttentionImpl::Reference}) out.push_back({mm, fu, at});
    return out;
}

// One path's logits against the reference, compared where they are: each thread
// counts the logits off by more than atol (NaN counts) and keeps its worst |d|
// packed above its index, and its worst relative error, as float bits (non-negative
// floats order as their bits; NaN is taken as +inf), then a warp combines them and
// one atomic per warp merges them. Comparing on the GPU spares each of the 18 paths
// a copy of B*T*V logits to the host and a host loop over them (about a second of
// every sweep job's verify, which ran before the timed part while the GPU waited).
struct LogitDiff {
    unsigned long long bad, worst;  // worst: |d| bits << 32 | index
    unsigned int rel_bits;
};

static __global__ void logit_diff_kernel(const float* got, const float* want, unsigned int n, float atol,
                                         LogitDiff* out) {
    unsigned long long bad = 0, worst = 0;
    unsigned int rel = 0;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float d = fabsf(got[i] - want[i]);
        if (!(d <= atol)) ++bad;
        const unsigned int bits = isnan(d) ? 0x7f800000u : __float_as_uint(d);
        worst = max(worst, ((unsigned long long)bits << 32) | i);
        rel = max(rel, isnan(d) ? 0x7f800000u : __float_as_uint(d / fmaxf(fabsf(want[i]), 1e-6f)));
    }
    for (int o = 16; o > 0; o >>= 1) {
        bad += __shfl_down_sync(0xffffffffu, bad, o);
        worst = max(worst, __shfl_down_sync(0xffffffffu, worst, o));
        rel = max(rel, __shfl_down_sync(0xffffffffu, rel, o));
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&out->bad, bad);
        atomicMax(&out->worst, worst);
        atomicMax(&out->rel_bits, rel);
    }
}

// Runs each path on ref.tokens and compares the logits; `out` gets one LogitCheck per
// path. Allocates the activations for ref.B x ref.T. Returns 0, or -1 on a CUDA error.
inline int check_logits(GPT2& model, const GPT2Reference& ref, const std::vector<EngineOptions>& paths, double atol,
                        std::vector<LogitCheck>& out) {
    if (ref.V != model.config.vocab_size) {
        fprintf(stderr, "reference vocab %d does not match the weights' %d: export both from the same model\n", ref.V,
                model.config.vocab_size);
        return -1;
    }
    const size_t n = ref.logits.size();
    if (n >= (1ull << 32)) {
        fprintf(stderr, "the reference has %zu logits; the check indexes at most 2^32\n", n);
        return -1;
    }
    if (gpt2_alloc_acts(model, ref.B, ref.T, true)) return -1;
    if (cudaCheck(cudaMemcpy(model.acts.tokens, ref.tokens.data(), ref.tokens.size() * sizeof(int), cudaMemcpyHostToDevice)))
        return -1;
    float* want = nullptr;
    LogitDiff* diff = nullptr;
    if (cudaCheck(cudaMalloc(&want, n * sizeof(float))) || cudaCheck(cudaMalloc(&diff, sizeof(LogitDiff))) ||
        cudaCheck(cudaMemcpy(want, ref.logits.data(), n * sizeof(float), cudaMemcpyHostToDevice))) {
        cudaFree(want);
        return -1;
    }
    int err = 0;
    for (const EngineOptions& opt : paths) {
        // Poison the logits so an output the engine never writes cannot pass.
        LogitDiff d{};
        err = cudaCheck(cudaMemset(model.acts.logits, 0xff, n * sizeof(float))) ||
              gpt2_forward(model, model.acts.tokens, ref.B, ref.T, opt, 0) ||
              cudaCheck(cudaMemset(diff, 0, sizeof(LogitDiff)));
        if (!err) {
            logit_diff_kernel<<<4 * 132, 256>>>(model.acts.logits, want, (unsigned int)n, (float)atol, diff);
            err = cudaCheck(cudaGetLastError()) || cudaCheck(cudaMemcpy(&d, diff, sizeof(d), cudaMemcpyDeviceToHost));
        }
        if (err) break;
        LogitCheck c;
        c.path = opt;
        c.bad = (size_t)d.bad;
        c.worst_index = (size_t)(d.worst & 0xffffffffull);
        const unsigned int abs_bits = (unsigned int)(d.worst >> 32);
        float abs_err, rel_err;
        memcpy(&abs_err, &abs_bits, sizeof(float));
        memcpy(&rel_err, &d.rel_bits, sizeof(float));
        c.max_abs_err = abs_err;
        c.max_rel_err = rel_err;
        c.pass = c.bad == 0;
        out.push_back(c);
    }
    cudaFree(want);
    cudaFree(diff);
    return err ? -1 : 0;
}

// The prompt into the decoding state (the tokens, the sequence, the last position), synchronised.
inline int start_decoding(GPT2& model, DecodeState& st, const std::vector<int>& prompt, cudaStream_t s) {
    const int P = (int)prompt.size(), last = P - 1;
    return cudaCheck(cudaMemcpyAsync(model.acts.tokens, prompt.data(), P * sizeof(int), cudaMemcpyHostToDevice, s)) ||
                   cudaCheck(cudaMemcpyAsync(st.sequence, prompt.data(), P * sizeof(int), cudaMemcpyHostToDevice, s)) ||
                   cudaCheck(cudaMemcpyAsync(st.pos, &last, sizeof(int), cudaMemcpyHostToDevice, s)) ||
                   cudaCheck(cudaStreamSynchronize(s))
               ? -1
               : 0;
}

// The prompt (P tokens) through the forward pass, filling the cache, then the first new token.
inline int prefill(GPT2& model, KVCache& cache, DecodeState& st, int P, int maxT, const EngineOptions& opt,
                   cudaStream_t s) {
    const int V = model.config.vocab_size;
    if (gpt2_forward(model, model.acts.tokens, 1, P, opt, s, &cache)) return -1;
    return argmax_forward(st.token, st.sequence, st.pos, model.acts.logits + (size_t)(P - 1) * V, 1, V, 0, maxT, st.argmax,
                          /*advance=*/true, s);
}

// n_new greedy tokens after `prompt`, into `tokens`. Allocates the activations for
// 1 x prompt and a cache of its own. Returns 0, or -1 after printing what failed.
inline int greedy_tokens(GPT2& model, const std::vector<int>& prompt, int n_new, const EngineOptions& opt,
                         std::vector<int>& tokens) {
    const int P = (int)prompt.size(), maxT = P + n_new;
    KVCache cache;
    DecodeState st;
    if (gpt2_alloc_acts(model, 1, P, false) || gpt2_alloc_cache(model, cache, st, 1, maxT, opt.decode_attention)) return -1;
    int err = start_decoding(model, st, prompt, 0) || prefill(model, cache, st, P, maxT, opt, 0);
    for (int i = 1; i < n_new && !err; ++i) err = gpt2_decode_step(model, cache, st, 1, 0);
    std::vector<int> sequence(maxT);
    if (!err) err = cudaCheck(cudaMemcpy(sequence.data(), st.sequence, maxT * sizeof(int), cudaMemcpyDeviceToHost));
    tokens.assign(sequence.begin() + P, sequence.end());
    gpt2_free_cache(cache, st);
    return err ? -1 : 0;
}
