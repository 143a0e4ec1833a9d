// gpt2_io.cu: reading the model's files (gpt2.h gives their formats): the weights into
// one device allocation, and transformers' reference outputs for the checks.
#include "gpt2.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "common.cuh"

namespace {

constexpr char kWeightsMagic[8] = {'G', 'P', 'T', '2', 'C', 'U', 'D', 'A'};
constexpr char kReferenceMagic[8] = {'G', 'P', 'T', '2', 'R', 'E', 'F', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 256;

// Element counts of the 16 tensors, in file order.
std::vector<size_t> tensor_sizes(const GPT2Config& c) {
    const size_t V = c.vocab_size, T = c.max_seq_len, L = c.num_layers, C = c.channels;
    return {V * C, T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
            L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
}

struct FileCloser {
    FILE* f;
    ~FileCloser() { if (f) fclose(f); }
};

// Reads a whole file, checking the magic, version and header size; on failure
// prints `what` (weights or reference), the path and the way out.
bool read_checked(const std::string& path, const char* what, const char magic[8], std::vector<char>& data) {
    const char* fix = "re-export it with `python -m gpt2_engine.export`";
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s file %s: %s; %s\n", what, path.c_str(), strerror(errno), fix);
        return false;
    }
    FileCloser closer{f};
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < (long)kHeaderBytes) {
        fprintf(stderr, "%s file %s is truncated: %ld bytes, shorter than its %zu-byte header; %s\n", what, path.c_str(),
                size, kHeaderBytes, fix);
        return false;
    }
    data.resize((size_t)size);
    if (fread(data.data(), 1, data.size(), f) != data.size()) {
        fprintf(stderr, "cannot read %s file %s: %s\n", what, path.c_str(), strerror(errno));
        return false;
    }
    if (memcmp(data.data(), magic, 8) != 0) {
        fprintf(stderr, "%s is not a GPT-2 %s file (wrong magic bytes); %s\n", path.c_str(), what, fix);
        return false;
    }
    uint32_t version, header;
    memcpy(&version, data.data() + 8, 4);
    memcpy(&header, data.data() + 12, 4);
    if (version != kFormatVersion || header != kHeaderBytes) {
        fprintf(stderr, "%s file %s has format version %u (header %u bytes); this engine reads version %u; %s\n", what,
                path.c_str(), version, header, kFormatVersion, fix);
        return false;
    }
    return true;
}

uint32_t u32_at(const std::vector<char>& d, size_t off) {
    uint32_t v;
    memcpy(&v, d.data() + off, 4);
    return v;
}

}  // namespace

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------

int gpt2_load(GPT2& m, const std::string& path) {
    std::vector<char> data;
    if (!read_checked(path, "weights", kWeightsMagic, data)) return -1;
    GPT2Config& c = m.config;
    if (u32_at(data, 16) != 1) {
        fprintf(stderr, "weights file %s has dtype %u; this engine reads float32 (1)\n", path.c_str(), u32_at(data, 16));
        return -1;
    }
    c.vocab_size = (int)u32_at(data, 20);
    c.max_seq_len = (int)u32_at(data, 24);
    c.num_layers = (int)u32_at(data, 28);
    c.num_heads = (int)u32_at(data, 32);
    c.channels = (int)u32_at(data, 36);
    memcpy(&c.ln_eps, data.data() + 40, 4);
    uint64_t num_params;
    memcpy(&num_params, data.data() + 48, 8);
    if (c.vocab_size <= 0 || c.max_seq_len <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.channels <= 0 ||
        c.channels % c.num_heads != 0 || u32_at(data, 44) != 16) {
        fprintf(stderr, "weights file %s has an impossible config: V=%d maxT=%d L=%d NH=%d C=%d tensors=%u (C must be a multiple of NH)\n",
                path.c_str(), c.vocab_size, c.max_seq_len, c.num_layers, c.num_heads, c.channels, u32_at(data, 44));
        return -1;
    }
    const std::vector<size_t> sizes = tensor_sizes(c);
    size_t expected = 0, padded = 0;
    for (size_t s : sizes) { expected += s; padded += gpt2_aligned_floats(s); }
    if (num_params != expected) {
        fprintf(stderr, "weights file %s says %llu parameters, but its config needs %zu; re-export it\n", path.c_str(),
                (unsigned long long)num_params, expected);
        return -1;
    }
    const size_t want_bytes = kHeaderBytes + expected * sizeof(float);
    if (data.size() != want_bytes) {
        fprintf(stderr, "weights file %s is %s: %zu bytes, expected %zu for this config; re-export it with `python -m gpt2_engine.export`\n",
                path.c_str(), data.size() < want_bytes ? "truncated" : "longer than its header says", data.size(), want_bytes);
        return -1;
    }
    if (cudaCheck(cudaMalloc(&m.params_memory, padded * sizeof(float)))) return -1;
    m.num_params = expected;
    float** ptrs[16] = {&m.params.wte, &m.params.wpe, &m.params.ln1w, &m.params.ln1b, &m.params.qkvw, &m.params.qkvb,
                        &m.params.attprojw, &m.params.attprojb, &m.params.ln2w, &m.params.ln2b, &m.params.fcw, &m.params.fcb,
                        &m.params.fcprojw, &m.params.fcprojb, &m.params.lnfw, &m.params.lnfb};
    const char* src = data.data() + kHeaderBytes;
    float* dst = m.params_memory;
    for (int i = 0; i < 16; ++i) {
        *ptrs[i] = dst;
        if (cudaCheck(cudaMemcpy(dst, src, sizes[i] * sizeof(float), cudaMemcpyHostToDevice))) return -1;
        src += sizes[i] * sizeof(float);
        dst += gpt2_aligned_floats(sizes[i]);
    }
    return 0;
}

int gpt2_load_reference(GPT2Reference& ref, const std::string& path) {
    std::vector<char> data;
    if (!read_checked(path, "reference", kReferenceMagic, data)) return -1;
    ref.B = (int)u32_at(data, 16);
    ref.T = (int)u32_at(data, 20);
    ref.V = (int)u32_at(data, 24);
    const size_t P = u32_at(data, 28), n_new = u32_at(data, 32);
    const size_t bt = (size_t)ref.B * ref.T;
    const size_t want = kHeaderBytes + bt * 4 + bt * ref.V * 4 + P * 4 + n_new * 4;
    if (data.size() != want) {
        fprintf(stderr, "reference file %s is %zu bytes, expected %zu for B=%d T=%d V=%d P=%zu new=%zu; re-export it\n",
                path.c_str(), data.size(), want, ref.B, ref.T, ref.V, P, n_new);
        return -1;
    }
    const char* p = data.data() + kHeaderBytes;
    ref.tokens.resize(bt);
    memcpy(ref.tokens.data(), p, bt * 4);
    p += bt * 4;
    ref.logits.resize(bt * ref.V);
    memcpy(ref.logits.data(), p, bt * ref.V * 4);
    p += bt * ref.V * 4;
    ref.prompt.resize(P);
    memcpy(ref.prompt.data(), p, P * 4);
    p += P * 4;
    ref.greedy.resize(n_new);
    memcpy(ref.greedy.data(), p, n_new * 4);
    return 0;
}
