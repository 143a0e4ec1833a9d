// gpt2_generate: greedy decoding with the KV cache, batch 1.
//
// The prompt runs through the full forward pass once (prefill), which also
// fills the KV cache; each new token then takes one decoding step (gpt2.cu:
// matvec layers, attention against the cache, argmax on the device). The step
// reads its position from device memory, so it is captured once as a CUDA graph
// and replayed per token (--no-graph launches it directly). Generation runs
// --repeats times; tokens/s is the median, counting every new token over
// prefill + decoding (as transformers' generate is timed), and also decoding alone.
//
// With --check (and --ref), the tokens must equal transformers' greedy tokens:
// exit 1 at the first difference. (gpt2_forward --ref checks the same tokens,
// with the shared prefill of checks.h and direct decoding steps.)
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../common.cuh"
#include "../gpt2.h"
#include "../launchers.h"
#include "args.h"
#include "checks.h"
#include "stats.h"

static const char* kUsage =
    "usage: gpt2_generate --weights FILE (--prompt ID,ID,... | --ref FILE) [--new N] [--matmul own|tiled|cublas]\n"
    "                     [--repeats N] [--no-graph] [--check]";

int main(int argc, char** argv) {
    Args args(kUsage, {"--weights", "--prompt", "--ref", "--new", "--matmul", "--repeats"}, {"--no-graph", "--check"});
    if (!args.parse(argc, argv) || !args.require("--weights")) return 2;
    bool ok = true;
    EngineOptions opt;
    ok = parse_matmul(args.str("--matmul", "own"), opt.matmul);
    const int repeats = args.integer("--repeats", 3, 1, 1000, ok);
    if (!ok) return 2;

    GPT2 model;
    if (gpt2_load(model, args.str("--weights"))) return 2;
    std::vector<int> prompt, expected;
    if (args.has("--ref")) {
        GPT2Reference ref;
        if (gpt2_load_reference(ref, args.str("--ref"))) return 2;
        prompt = ref.prompt;
        expected = ref.greedy;
    } else if (args.has("--prompt")) {
        for (const std::string& s : split_list(args.str("--prompt"))) prompt.push_back(atoi(s.c_str()));
    }
    if (prompt.empty()) { fprintf(stderr, "no prompt: give --prompt ID,ID,... or --ref FILE\n%s\n", kUsage); return 2; }
    for (int t : prompt)
        if (t < 0 || t >= model.config.vocab_size) {
            fprintf(stderr, "prompt token %d is outside the vocabulary 0..%d\n", t, model.config.vocab_size - 1);
            return 2;
        }
    const int n_new = args.integer("--new", expected.empty() ? 64 : (int)expected.size(), 1, 1 << 20, ok);
    if (!ok) return 2;
    if (args.has("--check") && (int)expected.size() < n_new) {
        fprintf(stderr, "--check needs --ref with at least %d greedy tokens (it has %zu)\n", n_new, expected.size());
        return 2;
    }
    const int P = (int)prompt.size(), maxT = P + n_new;

    KVCache cache;
    DecodeState st;
    if (gpt2_alloc_acts(model, 1, P, false) || gpt2_alloc_cache(model, cache, st, 1, maxT)) return 2;
    cudaStream_t s;
    cudaEvent_t e0, e1, e2;
    if (cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) || cudaCheck(cudaEventCreate(&e0)) ||
        cudaCheck(cudaEventCreate(&e1)) || cudaCheck(cudaEventCreate(&e2)))
        return 1;
    const bool use_graph = !args.has("--no-graph");
    cudaGraphExec_t step_graph = nullptr;
    std::vector<int> sequence(maxT);
    std::vector<double> overall_tps, decode_tps, prefill_ms;

    for (int rep = 0; rep <= repeats; ++rep) {  // rep 0 warms up (module load, graph build)
        if (start_decoding(model, st, prompt, s)) return 1;
        cudaCheck(cudaEventRecord(e0, s));
        if (prefill(model, cache, st, P, maxT, opt, s)) return 1;
        cudaCheck(cudaEventRecord(e1, s));
        if (use_graph && !step_graph) {
            cudaGraph_t graph;
            if (cudaCheck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal))) return 1;
            const int err = gpt2_decode_step(model, cache, st, 1, s);
            if (cudaCheck(cudaStreamEndCapture(s, &graph)) || err) return 1;
            if (cudaCheck(cudaGraphInstantiate(&step_graph, graph, 0))) return 1;
            cudaGraphDestroy(graph);
        }
        for (int i = 1; i < n_new; ++i) {
            if (use_graph ? cudaCheck(cudaGraphLaunch(step_graph, s)) : gpt2_decode_step(model, cache, st, 1, s) != 0) return 1;
        }
        cudaCheck(cudaEventRecord(e2, s));
        if (cudaCheck(cudaEventSynchronize(e2))) return 1;
        float pre = 0, dec = 0;
        cudaCheck(cudaEventElapsedTime(&pre, e0, e1));
        cudaCheck(cudaEventElapsedTime(&dec, e1, e2));
        if (rep > 0) {
            prefill_ms.push_back(pre);
            overall_tps.push_back(n_new / ((pre + dec) * 1e-3));
            if (n_new > 1) decode_tps.push_back((n_new - 1) / (dec * 1e-3));
        }
        if (cudaCheck(cudaMemcpy(sequence.data(), st.sequence, maxT * sizeof(int), cudaMemcpyDeviceToHost))) return 1;
    }

    int mismatch = -1;
    if (args.has("--check"))
        for (int i = 0; i < n_new && mismatch < 0; ++i)
            if (sequence[P + i] != expected[i]) mismatch = i;
    printf("{\"schema\": \"engine-generate/1\", \"device\": %s, \"prompt_len\": %d, \"new_tokens\": %d, \"graph\": %s, \"matmul\": \"%s\",\n",
           device_json().c_str(), P, n_new, use_graph ? "true" : "false", matmul_name(opt.matmul));
    printf(" \"tokens_per_s\": %.1f, \"decode_tokens_per_s\": %.1f, \"prefill_ms\": %.3f, \"repeats\": %d,\n \"tokens\": [",
           summarize(overall_tps).median, summarize(decode_tps).median, summarize(prefill_ms).median, repeats);
    for (int i = 0; i < n_new; ++i) printf("%s%d", i ? ", " : "", sequence[P + i]);
    printf("]");
    if (args.has("--check")) printf(",\n \"matches_reference\": %s, \"first_mismatch\": %d", mismatch < 0 ? "true" : "false", mismatch);
    printf("}\n");
    if (mismatch >= 0) {
        fprintf(stderr, "FAIL: token %d is %d, transformers chose %d\n", mismatch, sequence[P + mismatch], expected[mismatch]);
        return 1;
    }
    gpt2_free_cache(cache, st);
    gpt2_free(model);
    return 0;
}
