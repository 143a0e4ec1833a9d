// gpt2_forward: the profile target. Runs the forward pass on seeded random tokens
// and prints JSON: the whole forward's time per iteration and, with
// --kernel-timing, every kernel's time per launch shape from CUDA events.
//
// With --ref FILE it first checks itself against transformers (checks.h): the
// logits on every matmul x fusion x attention path within --atol (1e-3), and the
// greedy tokens of the decoding path; on a mismatch it says which on stderr and
// exits 1 before any timing (a sweep's `verify: profile`: one process and one
// weight load check and time a configuration).
//
// Phases: (check) -> warm-up (not recorded, not profiled) -> timed iterations between
// cudaProfilerStart/Stop (what nsys --capture-range=cudaProfilerApi and
// ncu --profile-from-start off see; each iteration is an NVTX range
// "iteration") -> with --kernel-timing, the same number of iterations again with
// an event pair around every launch (kept apart, so events never inflate the
// profiled or forward times). Each of those iterations starts with a kernel that
// holds the GPU for a few milliseconds while the host queues the whole pass, so
// no launch's events include the wait for the host to submit it (the idea of
// nvbench's blocking kernel); without it, short kernels read several times slower
// than nsys reports them.
#include <cuda_profiler_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../common.cuh"
#include "../gpt2.h"
#include "args.h"
#include "checks.h"
#include "stats.h"
#include "timing.h"

static const char* kUsage =
    "usage: gpt2_forward --weights FILE [-b BATCH] [-t SEQ_LEN] [-n ITERATIONS] [-w WARMUP]\n"
    "                    [--matmul tf32x3|own|tiled|cublas] [--fusion none|prepare|full] [--attention flash|reference]\n"
    "                    [--kernel-timing] [--seed N] [--json FILE] [--ref FILE [--atol 1e-3]]";

namespace {

// The logits on every path and the greedy tokens against the reference file.
// 0 when both match; 1 after a FAIL line on stderr when not; 2 when the file is unusable.
int check_against_reference(GPT2& model, const std::string& path, double atol) {
    GPT2Reference ref;
    if (gpt2_load_reference(ref, path)) return 2;
    std::vector<LogitCheck> checks;
    if (check_logits(model, ref, all_paths(), atol, checks)) return ref.V == model.config.vocab_size ? 1 : 2;
    const LogitCheck* worst = &checks.front();
    int failures = 0;
    for (const LogitCheck& c : checks) {
        failures += !c.pass;
        if (!(c.max_abs_err <= worst->max_abs_err)) worst = &c;
    }
    const char* where[] = {matmul_name(worst->path.matmul), fusion_name(worst->path.fusion), attention_name(worst->path.attention)};
    if (failures) {
        fprintf(stderr, "FAIL: logits outside atol=%g on %d of %zu paths (worst: matmul %s, fusion %s, attention %s, "
                        "max abs error %.3e at logit %zu)\n", atol, failures, checks.size(), where[0], where[1], where[2],
                worst->max_abs_err, worst->worst_index);
        return 1;
    }
    std::vector<int> tokens;
    if (greedy_tokens(model, ref.prompt, (int)ref.greedy.size(), EngineOptions{}, tokens)) return 1;
    for (size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] != ref.greedy[i]) {
            fprintf(stderr, "FAIL: greedy token %zu is %d, transformers chose %d (decoding with the KV cache)\n", i,
                    tokens[i], ref.greedy[i]);
            return 1;
        }
    fprintf(stderr, "check: logits within atol=%g on %zu paths (max abs error %.3e), %zu greedy tokens as transformers'\n",
            atol, checks.size(), worst->max_abs_err, tokens.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Args args(kUsage, {"--weights", "-b", "-t", "-n", "-w", "--matmul", "--fusion", "--attention", "--seed", "--json",
                       "--ref", "--atol"},
              {"--kernel-timing"});
    if (!args.parse(argc, argv) || !args.require("--weights")) return 2;
    bool ok = true;
    const int B = args.integer("-b", 4, 1, 1 << 16, ok);
    const int T = args.integer("-t", 64, 1, 1 << 20, ok);
    const int iters = args.integer("-n", 10, 1, 100000, ok);
    const int warmup = args.integer("-w", 3, 0, 100000, ok);
    const int seed = args.integer("--seed", 1234, 0, 1 << 30, ok);
    const double atol = args.real("--atol", 1e-3, ok);
    EngineOptions opt;
    ok = ok && parse_matmul(args.str("--matmul", "tf32x3"), opt.matmul) && parse_fusion(args.str("--fusion", "full"), opt.fusion) &&
         parse_attention(args.str("--attention", "flash"), opt.attention);
    if (!ok) return 2;

    GPT2 model;
    if (gpt2_load(model, args.str("--weights"))) return 2;
    if (args.has("--ref")) {
        const int failed = check_against_reference(model, args.str("--ref"), atol);
        if (failed) return failed;
    }
    if (gpt2_alloc_acts(model, B, T, opt.attention == AttentionImpl::Reference)) return 2;
    std::vector<int> tokens((size_t)B * T);
    uint64_t state = (uint64_t)seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int& t : tokens) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        t = (int)((state >> 33) % (uint64_t)model.config.vocab_size);
    }
    if (cudaCheck(cudaMemcpy(model.acts.tokens, tokens.data(), tokens.size() * sizeof(int), cudaMemcpyHostToDevice))) return 1;

    cudaStream_t stream;
    cudaEvent_t start, stop;
    if (cudaCheck(cudaStreamCreate(&stream)) || cudaCheck(cudaEventCreate(&start)) || cudaCheck(cudaEventCreate(&stop))) return 1;
    auto forward = [&]() { return gpt2_forward(model, model.acts.tokens, B, T, opt, stream); };

    for (int i = 0; i < warmup; ++i)
        if (forward()) return 1;
    if (cudaCheck(cudaStreamSynchronize(stream))) return 1;

    std::vector<double> forward_ms;
    cudaProfilerStart();
    for (int i = 0; i < iters; ++i) {
        nvtxRangePushA("iteration");
        cudaCheck(cudaEventRecord(start, stream));
        if (forward()) return 1;
        cudaCheck(cudaEventRecord(stop, stream));
        nvtxRangePop();
        if (cudaCheck(cudaEventSynchronize(stop))) return 1;
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, start, stop));
        forward_ms.push_back(ms);
    }
    cudaProfilerStop();

    KernelTimes kernels;
    if (args.has("--kernel-timing")) {
        LaunchRecorder& rec = LaunchRecorder::get();
        // Hold the GPU longer than the host takes to queue a pass (measured on the
        // forward timing above: at least 5 ms, twice the slowest forward pass).
        const double hold_ms = std::max(5.0, 2.0 * summarize(forward_ms).max);
        for (int i = 0; i < iters; ++i) {
            rec.reset();
            hold_gpu_kernel<<<1, 1, 0, stream>>>((unsigned long long)(hold_ms * 1e6));
            rec.enabled = true;
            const int err = forward();
            rec.enabled = false;
            if (err || cudaCheck(cudaStreamSynchronize(stream)) || kernels.add_iteration(rec.records)) return 1;
        }
    }

    FILE* out = stdout;
    if (args.has("--json") && !(out = fopen(args.str("--json").c_str(), "w"))) {
        fprintf(stderr, "cannot write %s\n", args.str("--json").c_str());
        return 2;
    }
    const GPT2Config& c = model.config;
    fprintf(out, "{\n  \"schema\": \"engine-timing/1\",\n  \"program\": \"gpt2_forward\",\n  \"device\": %s,\n", device_json().c_str());
    fprintf(out, "  \"model\": {\"vocab_size\": %d, \"max_seq_len\": %d, \"num_layers\": %d, \"num_heads\": %d, \"channels\": %d},\n",
            c.vocab_size, c.max_seq_len, c.num_layers, c.num_heads, c.channels);
    fprintf(out, "  \"run\": {\"batch\": %d, \"seq_len\": %d, \"iterations\": %d, \"warmup\": %d, \"matmul\": \"%s\", \"fusion\": \"%s\", \"attention\": \"%s\"},\n",
            B, T, iters, warmup, matmul_name(opt.matmul), fusion_name(opt.fusion), attention_name(opt.attention));
    fprintf(out, "  \"forward_ms\": {%s},\n", stats_json(summarize(forward_ms), "ms").c_str());
    kernels.write_json(out, iters);
    fprintf(out, "\n}\n");
    if (out != stdout) fclose(out);
    gpt2_free(model);
    return 0;
}
