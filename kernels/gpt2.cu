// gpt2.cu: the model (see gpt2.h for the file formats and the API): its buffers, the
// forward pass, the decoding step, the options and device facts (gpt2_io.cu reads its files).
#include "gpt2.h"

#include <cstdio>
#include <string>
#include <utility>

#include "common.cuh"
#include "launchers.h"

#define TRY(call)                     \
    do {                              \
        if ((call) != 0) return -1;   \
    } while (0)

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------

int gpt2_alloc_acts(GPT2& m, int B, int T, bool reference_attention) {
    const GPT2Config& c = m.config;
    if (B <= 0 || T <= 0 || T > c.max_seq_len) {
        fprintf(stderr, "batch %d x sequence %d is not possible: sequence must be 1..%d (n_positions)\n", B, T, c.max_seq_len);
        return -1;
    }
    if (m.acts_memory) cudaCheck(cudaFree(m.acts_memory));
    // The reference attention's score buffers: asked for, or the one path a head size with no
    // flash build has (attention() falls back to it).
    const bool scores = reference_attention || !attention_flash_supports(c.channels / c.num_heads);
    const size_t N = (size_t)B * T, C = c.channels, att = scores ? (size_t)B * c.num_heads * T * T : 0;
    const size_t floats[] = {N * C, N * C, N * C, N * 3 * C, N * C, N * C, N * 4 * C, N * c.vocab_size, att, att};
    size_t total = 0;
    for (size_t f : floats) total += gpt2_aligned_floats(f);
    total += gpt2_aligned_floats(N);  // tokens
    if (cudaCheck(cudaMalloc(&m.acts_memory, total * sizeof(float)))) return -1;
    float* p = static_cast<float*>(m.acts_memory);
    float** dst[] = {&m.acts.x, &m.acts.x_alt, &m.acts.ln, &m.acts.qkv, &m.acts.atty, &m.acts.proj, &m.acts.fch,
                     &m.acts.logits, &m.acts.preatt, &m.acts.att};
    for (size_t i = 0; i < sizeof(floats) / sizeof(floats[0]); ++i) {
        *dst[i] = floats[i] ? p : nullptr;
        p += gpt2_aligned_floats(floats[i]);
    }
    m.acts.tokens = reinterpret_cast<int*>(p);
    m.acts.B = B;
    m.acts.T = T;
    return 0;
}

bool gpt2_decode_attention_fits(const GPT2Config& c, int B, DecodeAttention attention) {
    if (attention != DecodeAttention::Fused || matvec_decode_attends(B, c.channels, c.num_heads, 0)) return true;
    fprintf(stderr, "decoding attention 'fused': batch %d of %d channels, %d heads cannot run it in the qkv matvec "
                    "(its LayerNorm must fit 48 KB of shared memory, heads at most 128 wide); use auto or split\n",
            B, c.channels, c.num_heads);
    return false;
}

int gpt2_alloc_cache(const GPT2& m, KVCache& cache, DecodeState& state, int B, int maxT, DecodeAttention attention) {
    const GPT2Config& c = m.config;
    if (maxT > c.max_seq_len) {
        fprintf(stderr, "the KV cache needs %d positions, over the model's n_positions=%d: shorten the prompt or --new\n",
                maxT, c.max_seq_len);
        return -1;
    }
    if (!gpt2_decode_attention_fits(c, B, attention)) return -1;
    cache.attention = gpt2_decode_attention(c, B, maxT, attention);
    const size_t n = (size_t)c.num_layers * B * maxT * c.channels;
    const int NH = c.num_heads, HS = c.channels / NH;
    const size_t counters = attention_decode_counters(B, NH) * sizeof(unsigned int);
    const size_t slots = argmax_scratch_slots(B), argmax_counters = (B + 1) * sizeof(unsigned int);
    cache.B = B;
    cache.maxT = maxT;
    if (cudaCheck(cudaMalloc(&cache.k, n * sizeof(float))) || cudaCheck(cudaMalloc(&cache.v, n * sizeof(float))) ||
        cudaCheck(cudaMalloc(&cache.scratch, attention_decode_scratch_floats(B, NH, HS, maxT) * sizeof(float))) ||
        cudaCheck(cudaMalloc(&cache.counters, counters)) || cudaCheck(cudaMemset(cache.counters, 0, counters)) ||
        cudaCheck(cudaMalloc(&state.token, B * sizeof(int))) || cudaCheck(cudaMalloc(&state.pos, sizeof(int))) ||
        cudaCheck(cudaMalloc(&state.sequence, (size_t)B * maxT * sizeof(int))) ||
        cudaCheck(cudaMalloc(&state.argmax.value, slots * sizeof(float))) ||
        cudaCheck(cudaMalloc(&state.argmax.index, slots * sizeof(int))) ||
        cudaCheck(cudaMalloc(&state.argmax.counters, argmax_counters)) ||
        cudaCheck(cudaMemset(state.argmax.counters, 0, argmax_counters)) ||
        cudaCheck(cudaMalloc(&state.best, B * sizeof(unsigned long long))) ||
        cudaCheck(cudaMemset(state.best, 0, B * sizeof(unsigned long long))))
        return -1;
    return 0;
}

void gpt2_free(GPT2& m) {
    if (m.params_memory) cudaFree(m.params_memory);
    if (m.acts_memory) cudaFree(m.acts_memory);
    m.params_memory = nullptr;
    m.acts_memory = nullptr;
}

void gpt2_free_cache(KVCache& cache, DecodeState& state) {
    for (void* p : {(void*)cache.k, (void*)cache.v, (void*)cache.scratch, (void*)cache.counters, (void*)state.token,
                    (void*)state.pos, (void*)state.sequence, (void*)state.argmax.value, (void*)state.argmax.index,
                    (void*)state.argmax.counters, (void*)state.best})
        if (p) cudaFree(p);
    cache = KVCache{};
    state = DecodeState{};
}

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------

namespace {

struct LayerParams {
    const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

LayerParams layer(const GPT2& m, int l) {
    const GPT2Params& p = m.params;
    const size_t C = m.config.channels;
    return {p.ln1w + l * C,         p.ln1b + l * C,     p.qkvw + l * 3 * C * C, p.qkvb + l * 3 * C,
            p.attprojw + l * C * C, p.attprojb + l * C, p.ln2w + l * C,         p.ln2b + l * C,
            p.fcw + l * 4 * C * C,  p.fcb + l * 4 * C,  p.fcprojw + l * 4 * C * C, p.fcprojb + l * C};
}

size_t cache_layer_offset(const GPT2& m, const KVCache& cache, int l) {
    return (size_t)l * cache.B * cache.maxT * m.config.channels;
}

int attention(GPT2& m, float* out, const float* qkv, int B, int T, const EngineOptions& opt, cudaStream_t s) {
    const int NH = m.config.num_heads, HS = m.config.channels / NH;
    if (opt.attention == AttentionImpl::Flash && attention_flash_supports(HS))
        return attention_flash_forward(out, qkv, B, T, NH, HS, s);
    if (opt.attention == AttentionImpl::Flash) {
        static bool warned = false;
        if (!warned) fprintf(stderr, "note: head size %d has no flash build here; using the reference attention\n", HS);
        warned = true;
    }
    if (!m.acts.preatt) {
        fprintf(stderr, "reference attention needs its score buffers: allocate activations with reference_attention=true\n");
        return -1;
    }
    TRY(attention_qk_forward(m.acts.preatt, qkv, B, T, NH, HS, s));
    TRY(softmax_forward(m.acts.att, m.acts.preatt, B * NH * T, T, s));
    return attention_av_forward(out, m.acts.att, qkv, B, T, NH, HS, s);
}

}  // namespace

int gpt2_forward(GPT2& m, const int* d_tokens, int B, int T, const EngineOptions& opt, cudaStream_t s, KVCache* cache) {
    const GPT2Config& c = m.config;
    if (B > m.acts.B || T > m.acts.T) {
        fprintf(stderr, "forward of %d x %d exceeds the buffers allocated for %d x %d\n", B, T, m.acts.B, m.acts.T);
        return -1;
    }
    const int C = c.channels, L = c.num_layers, NH = c.num_heads, HS = C / NH, V = c.vocab_size, N = B * T;
    const float eps = c.ln_eps;
    GPT2Acts& a = m.acts;
    float* x = a.x;
    float* proj = a.proj;
    // out = epilogue(inp . w^T + bias). At fusion `full` the own kernels apply the
    // epilogue in their stores; otherwise (and after cuBLAS or the tiled kernel)
    // prepare-out applies it in a pass of its own. A few rows (a short prompt's
    // prefill) leave a tiled matmul with a handful of blocks; the matvec kernel
    // keeps one warp per output column instead.
    auto linear = [&](float* out, const float* inp, const float* w, const float* bias, Epilogue e, int OC, int IC) {
        const bool own = opt.matmul == MatmulImpl::Own || opt.matmul == MatmulImpl::Tf32x3;
        const bool fuse = own && opt.fusion == Fusion::Full;
        const Epilogue in_matmul = fuse ? e : Epilogue::None;
        int st;
        if (own && N <= matmul_max_matvec_rows())
            st = matvec_forward(in_matmul, out, inp, w, bias, nullptr, N, OC, IC, s);
        else if (own)
            st = matmul_fused_forward(opt.matmul, in_matmul, out, inp, w, bias, nullptr, N, OC, IC, s);
        else
            st = matmul_forward(opt.matmul, out, inp, w, N, OC, IC, s);
        if (st || fuse || e == Epilogue::None) return st;
        return prepare_forward(e, out, bias, nullptr, N * OC, OC, s);
    };

    TRY(encoder_forward(x, d_tokens, m.params.wte, m.params.wpe, nullptr, B, T, C, s));
    if (opt.fusion == Fusion::Full) TRY(layernorm_forward(a.ln, x, m.params.ln1w, m.params.ln1b, N, C, eps, s));

    for (int l = 0; l < L; ++l) {
        const LayerParams p = layer(m, l);
        if (opt.fusion != Fusion::Full) TRY(layernorm_forward(a.ln, x, p.ln1w, p.ln1b, N, C, eps, s));
        TRY(linear(a.qkv, a.ln, p.qkvw, p.qkvb, Epilogue::Bias, 3 * C, C));
        if (cache) {
            const size_t off = cache_layer_offset(m, *cache, l);
            TRY(kv_cache_write_forward(cache->k + off, cache->v + off, a.qkv, nullptr, B, T, NH, HS, cache->maxT, s));
        }
        TRY(attention(m, a.atty, a.qkv, B, T, opt, s));
        TRY(linear(proj, a.atty, p.attprojw, nullptr, Epilogue::None, C, C));
        switch (opt.fusion) {
            case Fusion::None:
                TRY(prepare_forward(Epilogue::Bias, proj, p.attprojb, nullptr, N * C, C, s));
                TRY(residual_forward(x, x, proj, N * C, s));
                TRY(layernorm_forward(a.ln, x, p.ln2w, p.ln2b, N, C, eps, s));
                break;
            case Fusion::Prepare:
                TRY(prepare_forward(Epilogue::BiasResidual, proj, p.attprojb, x, N * C, C, s));
                std::swap(x, proj);  // the residual stream now lives in the other buffer
                TRY(layernorm_forward(a.ln, x, p.ln2w, p.ln2b, N, C, eps, s));
                break;
            case Fusion::Full:
                TRY(residual_layernorm_forward(x, a.ln, x, proj, p.attprojb, p.ln2w, p.ln2b, N, C, eps, s));
                break;
        }
        if (opt.fusion == Fusion::None) {
            TRY(linear(a.fch, a.ln, p.fcw, p.fcb, Epilogue::Bias, 4 * C, C));
            TRY(gelu_forward(a.fch, a.fch, N * 4 * C, s));
        } else {
            TRY(linear(a.fch, a.ln, p.fcw, p.fcb, Epilogue::BiasGelu, 4 * C, C));
        }
        TRY(linear(proj, a.fch, p.fcprojw, nullptr, Epilogue::None, C, 4 * C));
        switch (opt.fusion) {
            case Fusion::None:
                TRY(prepare_forward(Epilogue::Bias, proj, p.fcprojb, nullptr, N * C, C, s));
                TRY(residual_forward(x, x, proj, N * C, s));
                break;
            case Fusion::Prepare:
                TRY(prepare_forward(Epilogue::BiasResidual, proj, p.fcprojb, x, N * C, C, s));
                std::swap(x, proj);
                break;
            case Fusion::Full: {
                // Normalize for the next layer now (or the final LayerNorm after the last).
                const bool last = l == L - 1;
                const LayerParams next = last ? p : layer(m, l + 1);
                TRY(residual_layernorm_forward(x, a.ln, x, proj, p.fcprojb, last ? m.params.lnfw : next.ln1w,
                                               last ? m.params.lnfb : next.ln1b, N, C, eps, s));
                break;
            }
        }
    }
    if (opt.fusion != Fusion::Full) TRY(layernorm_forward(a.ln, x, m.params.lnfw, m.params.lnfb, N, C, eps, s));
    TRY(linear(a.logits, a.ln, m.params.wte, nullptr, Epilogue::None, V, C));
    return 0;
}

int gpt2_decode_step(GPT2& m, KVCache& cache, DecodeState& st, int B, cudaStream_t s, bool overlap) {
    const GPT2Config& c = m.config;
    const int C = c.channels, L = c.num_layers, NH = c.num_heads, HS = C / NH, V = c.vocab_size;
    const float eps = c.ln_eps;
    GPT2Acts& a = m.acts;
    if (B > matmul_max_matvec_rows() || B > a.B || B > cache.B) {
        fprintf(stderr, "decoding batch %d: over MATVEC_MAX_ROWS=%d, the allocated batch %d or the cache's %d\n", B,
                matmul_max_matvec_rows(), a.B, cache.B);
        return -1;
    }
    // out = epilogue(LayerNorm(x) . w^T + bias): the LayerNorm inside the matvec's
    // blocks when B rows of C fit its shared memory (always at batch 1), else first.
    const bool fold = matvec_decode_folds_layernorm(B, C);
    // The attention in the qkv matvec (needs the fold: gpt2_alloc_cache chose Fused only then).
    const bool fused = cache.attention == DecodeAttention::Fused && fold;
    auto normed_linear = [&](Epilogue e, float* out, const float* lnw, const float* lnb, const float* w, const float* bias,
                             int OC, KVWrite kv, TokenPick pick = {}) {
        if (fold) return matvec_decode_forward(e, out, a.x, w, bias, nullptr, B, OC, C, s, RowNorm{lnw, lnb, eps}, kv, pick);
        if (layernorm_forward(a.ln, a.x, lnw, lnb, B, C, eps, s)) return -1;
        return matvec_decode_forward(e, out, a.ln, w, bias, nullptr, B, OC, C, s, RowNorm{}, kv, pick);
    };
    // Every kernel below waits for the one before it (common.cuh's rule) when launched so.
    const DependentLaunches dependent(overlap);
    TRY(encoder_forward(a.x, st.token, m.params.wte, m.params.wpe, st.pos, B, 1, C, s));
    for (int l = 0; l < L; ++l) {
        const LayerParams p = layer(m, l);
        const size_t off = cache_layer_offset(m, cache, l);
        // qkv, its k and v also stored into this layer's cache at the step's position, and
        // with a short context each head's attention in the block that completes the head
        KVWrite kv{cache.k + off, cache.v + off, st.pos, NH, cache.maxT};
        if (fused) {
            kv.attention = a.atty;
            kv.counters = cache.counters;
        }
        TRY(normed_linear(Epilogue::Bias, a.qkv, p.ln1w, p.ln1b, p.qkvw, p.qkvb, 3 * C, kv));
        if (!fused)
            TRY(attention_decode_split_forward(a.atty, a.qkv, cache.k + off, cache.v + off, st.pos, cache.scratch, cache.counters,
                                               B, NH, HS, cache.maxT, s));
        TRY(matvec_decode_forward(Epilogue::BiasResidual, a.x, a.atty, p.attprojw, p.attprojb, a.x, B, C, C, s, RowNorm{}, KVWrite{}));
        TRY(normed_linear(Epilogue::BiasGelu, a.fch, p.ln2w, p.ln2b, p.fcw, p.fcb, 4 * C, KVWrite{}));
        TRY(matvec_decode_forward(Epilogue::BiasResidual, a.x, a.fch, p.fcprojw, p.fcprojb, a.x, B, C, 4 * C, s, RowNorm{},
                                  KVWrite{}));
    }
    // The logits, folded into each row's best in the same blocks; then the next token
    // appended and the position moved on (argmax_kernel would read the logits back:
    // 6.7 against 1.3 us a step on an H100).
    const TokenPick pick{st.best, st.token, st.sequence, st.pos, cache.maxT};
    TRY(normed_linear(Epilogue::None, a.logits, m.params.lnfw, m.params.lnfb, m.params.wte, nullptr, V, KVWrite{}, pick));
    return token_pick_forward(pick, B, s);
}

// ---------------------------------------------------------------------------
// Options and device facts
// ---------------------------------------------------------------------------

namespace {

// Each option's values by name, in the order the error message lists them.
template <typename E>
using Named = std::pair<const char*, E>;
constexpr Named<MatmulImpl> kMatmuls[] = {
    {"own", MatmulImpl::Own}, {"tf32x3", MatmulImpl::Tf32x3}, {"tiled", MatmulImpl::Tiled}, {"cublas", MatmulImpl::Cublas}};
constexpr Named<Fusion> kFusions[] = {{"none", Fusion::None}, {"prepare", Fusion::Prepare}, {"full", Fusion::Full}};
constexpr Named<AttentionImpl> kAttentions[] = {{"flash", AttentionImpl::Flash}, {"reference", AttentionImpl::Reference}};
constexpr Named<DecodeAttention> kDecodeAttentions[] = {
    {"auto", DecodeAttention::Auto}, {"fused", DecodeAttention::Fused}, {"split", DecodeAttention::Split}};

// `out` = the value named `s`; else prints "FLAG S: expected a, b or c" and returns false.
template <typename E, size_t N>
bool parse_named(const char* flag, const std::string& s, const Named<E> (&values)[N], E& out) {
    for (const auto& [name, value] : values)
        if (s == name) { out = value; return true; }
    std::string expected;
    for (size_t i = 0; i < N; ++i) expected += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + values[i].first;
    fprintf(stderr, "%s %s: expected %s\n", flag, s.c_str(), expected.c_str());
    return false;
}

template <typename E, size_t N>
const char* name_of(const Named<E> (&values)[N], E value) {
    for (const auto& [name, v] : values)
        if (v == value) return name;
    return "?";
}

}  // namespace

bool parse_matmul(const std::string& s, MatmulImpl& out) { return parse_named("--matmul", s, kMatmuls, out); }
bool parse_fusion(const std::string& s, Fusion& out) { return parse_named("--fusion", s, kFusions, out); }
bool parse_attention(const std::string& s, AttentionImpl& out) { return parse_named("--attention", s, kAttentions, out); }
bool parse_decode_attention(const std::string& s, DecodeAttention& out) {
    return parse_named("--decode-attention", s, kDecodeAttentions, out);
}

const char* matmul_name(MatmulImpl m) { return name_of(kMatmuls, m); }
const char* fusion_name(Fusion f) { return name_of(kFusions, f); }
const char* attention_name(AttentionImpl a) { return name_of(kAttentions, a); }
const char* decode_attention_name(DecodeAttention a) { return name_of(kDecodeAttentions, a); }

DecodeAttention gpt2_decode_attention(const GPT2Config& c, int B, int maxT, DecodeAttention choice) {
    if (choice != DecodeAttention::Auto) return choice;
    return matvec_decode_attends(B, c.channels, c.num_heads, maxT) ? DecodeAttention::Fused : DecodeAttention::Split;
}

std::string device_json() {
    int dev = 0, driver = 0, runtime = 0;
    cudaDeviceProp prop{};
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&prop, dev);
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"name\": \"%s\", \"compute_capability\": \"%d.%d\", \"multiprocessors\": %d, \"cuda_driver\": %d, \"cuda_runtime\": %d}",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount, driver, runtime);
    return buf;
}
