// gpt2.h: the GPT-2 model on top of the kernel families: weights, buffers,
// the forward pass (three fusion levels, two attention paths, three matmuls),
// and one greedy decoding step against the KV cache.
//
// Weights file (written by `python -m gpt2_engine.export`, format version 1;
// all integers little-endian):
//
//   offset size  field
//   0      8     magic "GPT2CUDA"
//   8      4     u32 version (1)
//   12     4     u32 header_bytes (256)
//   16     4     u32 dtype (1 = float32)
//   20     4     u32 vocab_size V
//   24     4     u32 max_seq_len maxT (n_positions)
//   28     4     u32 num_layers L
//   32     4     u32 num_heads NH
//   36     4     u32 channels C (n_embd)
//   40     4     f32 layer_norm_epsilon
//   44     4     u32 num_tensors (16)
//   48     8     u64 num_params: float32 values after the header
//   56..255      zero
//   256..        the tensors, in this order, each row-major float32:
//                wte (V,C) wpe (maxT,C) ln1w (L,C) ln1b (L,C) qkvw (L,3C,C)
//                qkvb (L,3C) attprojw (L,C,C) attprojb (L,C) ln2w (L,C)
//                ln2b (L,C) fcw (L,4C,C) fcb (L,4C) fcprojw (L,C,4C)
//                fcprojb (L,C) lnfw (C) lnfb (C)
//   Linear weights are (out, in), i.e. transformers' Conv1D weights transposed.
//
// Reference file (same exporter, version 1): magic "GPT2REF\0", u32 version,
// u32 header_bytes (256), u32 B, u32 T, u32 V, u32 prompt_len P, u32 n_new,
// then at 256: tokens i32[B*T], logits f32[B*T*V], prompt i32[P], greedy i32[n_new].
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include "types.h"

// Floats rounded up to whole 256-byte blocks: each parameter tensor and activation buffer
// starts on one in device memory (the file packs them; float4 and cp.async need 16 bytes).
inline size_t gpt2_aligned_floats(size_t n) { return (n + 63) / 64 * 64; }

struct GPT2Config {
    int vocab_size = 0, max_seq_len = 0, num_layers = 0, num_heads = 0, channels = 0;
    float ln_eps = 1e-5f;
};

// Device pointers into one allocation; per-layer tensors are stacked along L.
struct GPT2Params {
    float *wte, *wpe, *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb,
        *lnfw, *lnfb;
};

enum class Fusion { None, Prepare, Full };
enum class AttentionImpl { Flash, Reference };

struct EngineOptions {
    MatmulImpl matmul = MatmulImpl::Tf32x3;  // the tensor cores at FP32 accuracy (own: the SIMT kernel)
    Fusion fusion = Fusion::Full;
    AttentionImpl attention = AttentionImpl::Flash;
    DecodeAttention decode_attention = DecodeAttention::Auto;  // a decoding step's (types.h)
};

struct GPT2Acts {
    int B = 0, T = 0;
    float *x = nullptr, *x_alt = nullptr, *ln = nullptr, *qkv = nullptr, *atty = nullptr, *proj = nullptr, *fch = nullptr,
          *logits = nullptr, *preatt = nullptr, *att = nullptr;
    int* tokens = nullptr;
};

// Per-layer caches of shape (B, NH, maxT, HS), stacked along L, and the decoding
// attention's scratch (its chunks' partial outputs, and per-head counters that
// start at zero and that each step leaves at zero), shared by the layers; how the
// steps attend (gpt2_alloc_cache resolves Auto to Fused or Split).
struct KVCache {
    int B = 0, maxT = 0;
    DecodeAttention attention = DecodeAttention::Split;
    float *k = nullptr, *v = nullptr;
    float* scratch = nullptr;
    unsigned int* counters = nullptr;
};

// Greedy decoding state, all in device memory so a step can be a CUDA graph.
struct DecodeState {
    int* token = nullptr;     // [B] the token fed next
    int* pos = nullptr;       // [1] its position
    int* sequence = nullptr;  // [B * maxT] prompt + generated tokens
    ArgmaxScratch argmax;     // argmax's per-part bests and counters (launchers.h), for the prefill's pick
    unsigned long long* best = nullptr;  // [B] the decoding LM head's packed maxima (TokenPick), at zero
};

struct GPT2 {
    GPT2Config config;
    GPT2Params params{};
    float* params_memory = nullptr;
    size_t num_params = 0;
    GPT2Acts acts;
    void* acts_memory = nullptr;
};

// Each returns 0, or -1 after printing what went wrong (file, value, what to do).
int gpt2_load(GPT2& model, const std::string& path);
int gpt2_alloc_acts(GPT2& model, int B, int T, bool reference_attention);
// Runs the forward pass on d_tokens (B*T, device); logits land in model.acts.logits.
// With `cache`, this layer's keys and values are also written at positions 0..T-1.
int gpt2_forward(GPT2& model, const int* d_tokens, int B, int T, const EngineOptions& opt, cudaStream_t stream,
                 KVCache* cache = nullptr);
// Whether B rows of this model can decode with `attention` (Fused: its attention in the qkv
// matvec, matvec_decode_attends); else prints why and what to use instead (bad input).
bool gpt2_decode_attention_fits(const GPT2Config& config, int B, DecodeAttention attention);
// `attention`: how the decoding steps attend; Fused where the model cannot is an error.
int gpt2_alloc_cache(const GPT2& model, KVCache& cache, DecodeState& state, int B, int maxT,
                     DecodeAttention attention = DecodeAttention::Auto);
// One decoding step for state.token at *state.pos; appends the pick to state.sequence.
// overlap: launch the step's kernels as programmatic dependents, each starting while
// the one before it ends (common.cuh, DependentLaunches; sm_90+, else ignored).
int gpt2_decode_step(GPT2& model, KVCache& cache, DecodeState& state, int B, cudaStream_t stream, bool overlap = true);
void gpt2_free(GPT2& model);
void gpt2_free_cache(KVCache& cache, DecodeState& state);

// Reference data from transformers (see the file format above).
struct GPT2Reference {
    int B = 0, T = 0, V = 0;
    std::vector<int> tokens, prompt, greedy;
    std::vector<float> logits;
};
int gpt2_load_reference(GPT2Reference& ref, const std::string& path);

// Parsing of the shared command-line options; each returns false after printing
// what was wrong and the values allowed.
bool parse_matmul(const std::string& s, MatmulImpl& out);
bool parse_fusion(const std::string& s, Fusion& out);
bool parse_attention(const std::string& s, AttentionImpl& out);
bool parse_decode_attention(const std::string& s, DecodeAttention& out);
const char* matmul_name(MatmulImpl m);
const char* fusion_name(Fusion f);
const char* attention_name(AttentionImpl a);
const char* decode_attention_name(DecodeAttention a);
// What Auto becomes for decoding `B` rows with a cache of maxT positions (Fused or Split);
// other choices stay as they are.
DecodeAttention gpt2_decode_attention(const GPT2Config& config, int B, int maxT, DecodeAttention choice);

// Device facts for result files: name, driver and runtime versions.
std::string device_json();
