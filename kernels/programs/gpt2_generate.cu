// gpt2_generate: greedy decoding with the KV cache, batch 1; the profile target of
// the decoding path (a sweep's `program: generate`), with gpt2_forward's conventions
// (-n, -w, NVTX "iteration" ranges, --kernel-timing --json, --ref before any timing).
//
// An iteration decodes --new N tokens after the prefill: N decoding steps (gpt2.cu:
// the step's split-K matvec layers, with the LayerNorms and the KV-cache writes
// folded in, attention against the cache, the greedy pick folded into the LM head), each feeding the
// last token and picking the next.
// The prefill (the prompt through the forward pass, filling the cache, and the pick
// of the first new token) runs before each iteration, outside it: it is what
// gpt2_forward measures, and it would hide the steps' kernels among the forward
// pass's. --prefill puts it inside the iteration (N + 1 new tokens an iteration, the
// way transformers' generate is timed).
//
// The prompt is --prompt-len seeded tokens (--seed, drawn as gpt2_forward draws its
// tokens) or --prompt ID,ID,...; it never comes from --ref, so a run measures the
// same work with and without the check.
//
// A step reads its position from device memory, so it is captured once as a CUDA
// graph and replayed per token (--no-graph launches its kernels directly); with
// --graph-steps G, G steps are captured into one graph, replayed per G tokens (the
// rest of an iteration one step a graph), so a step's first kernels also start
// while the step before it ends (the JSON's run.graph_steps: the steps a graph
// holds, at most --new; 0 without graphs). A server that checks each token for a
// stop on the host would decode up to G - 1 tokens past it. On sm_90
// and later each of a step's kernels starts while the one before it ends, loading its
// weights meanwhile (programmatic dependent launch, common.cuh); --no-overlap launches
// them one after another, as before sm_90 (the JSON's run.overlap says which ran).
// --matmul, --fusion and --attention choose the prefill's paths, as gpt2_forward's;
// a decoding step has one matvec path and two for attention against the cache
// (--decode-attention: fused into the qkv matvec, split into its own kernel, or auto,
// fused up to MATVEC_ATTENTION_MAX_KEYS positions; the JSON's run.decode_attention
// says which ran).
//
// Phases:
//   check (--ref FILE): transformers' prompt and greedy tokens from the reference
//       file, decoded on every path this run times (the graph; direct steps with
//       --no-graph or --kernel-timing); at the first different token it says which
//       on stderr and exits 1 before any timing (a sweep's verify_failed).
//   warm-up: -w iterations, not recorded, not profiled.
//   timed: -n iterations between cudaProfilerStart/Stop, each inside an NVTX range
//       "iteration" that holds the iteration's launches and nothing else (the prefill
//       and the copy of the prompt come before the range unless --prefill), so the
//       nsys, ncu and cupti backends attribute every kernel to its iteration. A
//       replayed graph's kernels count where their cudaGraphLaunch call was made
//       (nsys traces them one by one with --cuda-graph-trace=node, which the sweep
//       passes; ncu profiles graph kernels one by one by default).
//   --kernel-timing: as many iterations again with a CUDA-event pair around every
//       launch, running the steps as direct launches rather than the graph: the
//       recorder (common.cuh) records its events from the host around each launch,
//       and a replayed graph makes no host-side launches (events captured into the
//       graph would be the same events at every replay, to be read back after each
//       step). The direct steps launch the same kernels with the same launch sizes
//       as the graph's nodes; what they lack is the graph's shorter gaps between
//       kernels, which no per-kernel time includes anyway. Each step (and the prefill,
//       with --prefill) is queued behind a hold kernel twice as long as the host took
//       to queue the previous one with its events, and waited for: the whole step is
//       queued before its first kernel runs, so no launch's events include a wait
//       for the host.
//
// Prints engine-timing/1 JSON (to --json FILE, else stdout; sweep/profile/events.py):
// "forward_ms" is a timed iteration (the schema's name for the whole iteration's
// time); besides, "decode_ms" (the steps alone), "prefill_ms" (with --prefill),
// tokens/s (run.new_tokens, the tokens an iteration picks, over its median time)
// and "tokens", the last timed iteration's continuation of the prompt (the
// prefill's pick, then one token per step).
// Exit: 0; 1 on a CUDA error or (with --ref) a different token, before any timing;
// 2 on bad input.
#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common.cuh"
#include "../gpt2.h"
#include "args.h"
#include "checks.h"
#include "stats.h"
#include "timing.h"

static const char* kUsage =
    "usage: gpt2_generate --weights FILE [-b 1] [--new N] [-n ITERATIONS] [-w WARMUP]\n"
    "                     [--prompt-len P [--seed N] | --prompt ID,ID,...] [--prefill] [--no-graph | --graph-steps G]\n"
    "                     [--no-overlap]\n"
    "                     [--matmul tf32x3|own|tiled|cublas] [--fusion none|prepare|full] [--attention flash|reference]\n"
    "                     [--decode-attention auto|fused|split] [--kernel-timing] [--json FILE] [--ref FILE]";

namespace {

// One decoding run's buffers for a prompt: the activations (1 x P), the KV cache and
// decoding state for the prompt, the prefill's token and `steps` more, and the step's
// CUDA graph (captured once: it holds these buffers' addresses).
class Decoder {
public:
    Decoder(GPT2& model, const EngineOptions& opt, bool overlap, int graph_steps, cudaStream_t s)
        : model_(model), opt_(opt), overlap_(overlap), graph_steps_(graph_steps), s_(s) {}
    Decoder(const Decoder&) = delete;
    Decoder& operator=(const Decoder&) = delete;
    ~Decoder() {
        if (graph_) cudaGraphExecDestroy(graph_);
        if (single_) cudaGraphExecDestroy(single_);
        gpt2_free_cache(cache_, st_);
    }

    // Allocates for `steps` decoding steps after `prompt` and, with_graph, captures the
    // step. 0; 1 on a CUDA error; 2 when the positions or the decoding attention asked for do
    // not fit the model (printed).
    int init(const std::vector<int>& prompt, int steps, bool with_graph) {
        prompt_ = prompt;
        P_ = (int)prompt.size();
        maxT_ = P_ + 1 + steps;
        if (maxT_ > model_.config.max_seq_len) {
            fprintf(stderr, "a prompt of %d tokens and %d decoding steps need %d positions, over the model's "
                            "n_positions=%d: shorten the prompt or --new\n", P_, steps, maxT_, model_.config.max_seq_len);
            return 2;
        }
        if (!gpt2_decode_attention_fits(model_.config, 1, opt_.decode_attention)) return 2;
        if (gpt2_alloc_acts(model_, 1, P_, opt_.attention == AttentionImpl::Reference) ||
            gpt2_alloc_cache(model_, cache_, st_, 1, maxT_, opt_.decode_attention))
            return 1;
        if (!with_graph) return 0;
        graph_steps_ = std::min(graph_steps_, steps);
        return capture(graph_, graph_steps_) || (graph_steps_ > 1 && capture(single_, 1)) ? 1 : 0;
    }
    // The prompt into device memory, the position at its last token (synchronised).
    int start() { return start_decoding(model_, st_, prompt_, s_); }
    // The prompt through the forward pass (filling the cache) and the first new token.
    int prefill() { return ::prefill(model_, cache_, st_, P_, maxT_, opt_, s_); }
    // n decoding steps: graphs of graph_steps steps replayed, then single steps' for the
    // rest; or the steps' kernels launched directly.
    int steps(int n, bool with_graph) {
        int err = 0;
        for (int i = 0; i < n && !err; ++i)
            if (!with_graph) {
                err = gpt2_decode_step(model_, cache_, st_, 1, s_, overlap_);
            } else {
                const bool whole = n - i >= graph_steps_;  // always, at one step a graph
                err = cudaCheck(cudaGraphLaunch(whole ? graph_ : single_, s_)) ? -1 : 0;
                if (whole) i += graph_steps_ - 1;
            }
        return err;
    }
    // The new tokens so far: the prefill's pick, then one per step (synchronises).
    int new_tokens(std::vector<int>& out) {
        std::vector<int> sequence(maxT_);
        if (cudaCheck(cudaMemcpyAsync(sequence.data(), st_.sequence, maxT_ * sizeof(int), cudaMemcpyDeviceToHost, s_)) ||
            cudaCheck(cudaStreamSynchronize(s_)))
            return -1;
        out.assign(sequence.begin() + P_, sequence.end());
        return 0;
    }
    int prompt_len() const { return P_; }
    int graph_steps() const { return graph_steps_; }

private:
    // `n` decoding steps captured into one CUDA graph.
    int capture(cudaGraphExec_t& exec, int n) {
        cudaGraph_t graph;
        if (cudaCheck(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal))) return 1;
        int err = 0;
        for (int i = 0; i < n && !err; ++i) err = gpt2_decode_step(model_, cache_, st_, 1, s_, overlap_);
        if (cudaCheck(cudaStreamEndCapture(s_, &graph)) || err) return 1;
        const bool failed = cudaCheck(cudaGraphInstantiate(&exec, graph, 0));
        cudaGraphDestroy(graph);
        return failed ? 1 : 0;
    }

    GPT2& model_;
    EngineOptions opt_;
    bool overlap_;
    int graph_steps_;
    cudaStream_t s_;
    std::vector<int> prompt_;
    int P_ = 0, maxT_ = 0;
    KVCache cache_;
    DecodeState st_;
    cudaGraphExec_t graph_ = nullptr;   // graph_steps_ steps (at most the run's)
    cudaGraphExec_t single_ = nullptr;  // one step, for the steps after the last whole graph_
};

// Transformers' greedy tokens (the reference file's prompt and continuation) against
// this engine's, decoded on each path asked for. 0 when they match; 1 after a FAIL
// line on stderr, or on a CUDA error; 2 when the file is unusable.
int check_against_reference(GPT2& model, const std::string& path, const EngineOptions& opt, bool overlap, bool graph,
                            int graph_steps, bool direct, cudaStream_t s) {
    GPT2Reference ref;
    if (gpt2_load_reference(ref, path)) return 2;
    if (ref.V != model.config.vocab_size) {
        fprintf(stderr, "reference vocab %d does not match the weights' %d: export both from the same model\n", ref.V,
                model.config.vocab_size);
        return 2;
    }
    if (ref.prompt.empty() || ref.greedy.empty()) {
        fprintf(stderr, "reference %s holds no greedy prompt or tokens; re-export it with `python -m gpt2_engine.export`\n",
                path.c_str());
        return 2;
    }
    Decoder d(model, opt, overlap, graph_steps, s);
    const int steps = (int)ref.greedy.size() - 1;
    if (const int err = d.init(ref.prompt, steps, graph)) return err;
    std::string paths;
    for (const bool with_graph : {true, false}) {
        if (!(with_graph ? graph : direct)) continue;
        const char* what = with_graph ? "a CUDA graph per step" : "direct decoding steps";
        std::vector<int> tokens;
        int err = d.start() || d.prefill();
        err = err || d.steps(steps, with_graph);
        if (err || d.new_tokens(tokens)) return 1;
        for (size_t i = 0; i < tokens.size(); ++i)
            if (tokens[i] != ref.greedy[i]) {
                fprintf(stderr, "FAIL: greedy token %zu is %d, transformers chose %d (KV cache, %s)\n", i, tokens[i],
                        ref.greedy[i], what);
                return 1;
            }
        paths += paths.empty() ? what : std::string(" and ") + what;
    }
    fprintf(stderr, "check: %zu greedy tokens as transformers' after a %d-token prompt (%s)\n", ref.greedy.size(),
            (int)ref.prompt.size(), paths.c_str());
    return 0;
}

// n tokens drawn as gpt2_forward draws its input (the same generator and seed).
std::vector<int> seeded_tokens(int n, int seed, int vocab_size) {
    std::vector<int> tokens(n);
    uint64_t state = (uint64_t)seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int& t : tokens) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        t = (int)((state >> 33) % (uint64_t)vocab_size);
    }
    return tokens;
}

}  // namespace

int main(int argc, char** argv) {
    Args args(kUsage, {"--weights", "-b", "--new", "-n", "-w", "--prompt-len", "--prompt", "--seed", "--matmul", "--fusion",
                       "--attention", "--decode-attention", "--graph-steps", "--json", "--ref"},
              {"--prefill", "--no-graph", "--no-overlap", "--kernel-timing"});
    if (!args.parse(argc, argv) || !args.require("--weights")) return 2;
    bool ok = true;
    const int B = args.integer("-b", 1, 1, 1 << 16, ok);
    const int steps = args.integer("--new", 64, 1, 1 << 20, ok);
    const int iters = args.integer("-n", 10, 1, 100000, ok);
    const int warmup = args.integer("-w", 3, 0, 100000, ok);
    const int prompt_len = args.integer("--prompt-len", 8, 1, 1 << 20, ok);
    const int seed = args.integer("--seed", 1234, 0, 1 << 30, ok);
    const int graph_steps = args.integer("--graph-steps", 1, 1, 1024, ok);
    EngineOptions opt;
    ok = ok && parse_matmul(args.str("--matmul", "tf32x3"), opt.matmul) && parse_fusion(args.str("--fusion", "full"), opt.fusion) &&
         parse_attention(args.str("--attention", "flash"), opt.attention) &&
         parse_decode_attention(args.str("--decode-attention", "auto"), opt.decode_attention);
    if (!ok) return 2;
    if (B != 1) {
        fprintf(stderr, "-b %d: gpt2_generate decodes one sequence, so its batch must be 1 (in a sweep, a generate "
                        "workload has batch 1 and seq_len = the tokens decoded per iteration)\n", B);
        return 2;
    }
    if (args.has("--prompt") && (args.has("--prompt-len") || args.has("--seed"))) {
        fprintf(stderr, "--prompt gives the prompt itself: drop --prompt-len and --seed, which draw one\n%s\n", kUsage);
        return 2;
    }
    const bool with_graph = !args.has("--no-graph"), with_prefill = args.has("--prefill"),
               kernel_timing = args.has("--kernel-timing"), overlap = !args.has("--no-overlap");
    if (!with_graph && args.has("--graph-steps")) {
        fprintf(stderr, "--graph-steps sets the steps a CUDA graph holds: drop --no-graph, or --graph-steps\n");
        return 2;
    }

    GPT2 model;
    if (gpt2_load(model, args.str("--weights"))) return 2;
    const int V = model.config.vocab_size;
    std::vector<int> prompt;
    if (args.has("--prompt")) {
        for (const std::string& word : split_list(args.str("--prompt"))) {
            char* end = nullptr;
            const long t = strtol(word.c_str(), &end, 10);
            if (*end != '\0' || t < 0 || t >= V) {
                fprintf(stderr, "--prompt: %s is not a token id of the vocabulary 0..%d\n", word.c_str(), V - 1);
                return 2;
            }
            prompt.push_back((int)t);
        }
        if (prompt.empty()) { fprintf(stderr, "--prompt holds no token ids\n%s\n", kUsage); return 2; }
    } else {
        prompt = seeded_tokens(prompt_len, seed, V);
    }

    cudaStream_t s;
    cudaEvent_t e0, e1, e2;
    if (cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) || cudaCheck(cudaEventCreate(&e0)) ||
        cudaCheck(cudaEventCreate(&e1)) || cudaCheck(cudaEventCreate(&e2)))
        return 1;
    // How the timed steps attend (auto resolved at their cache's length), so the check
    // decodes the reference's tokens the same way whatever its prompt's length.
    opt.decode_attention = gpt2_decode_attention(model.config, 1, (int)prompt.size() + 1 + steps, opt.decode_attention);
    if (args.has("--ref")) {
        const int failed = check_against_reference(model, args.str("--ref"), opt, overlap, with_graph, graph_steps,
                                                   !with_graph || kernel_timing, s);
        if (failed) return failed;
    }
    Decoder d(model, opt, overlap, graph_steps, s);
    if (const int err = d.init(prompt, steps, with_graph)) return err;

    // One iteration; `timed` records its times and opens its NVTX range.
    std::vector<double> iteration_ms, prefill_ms, decode_ms;
    auto iteration = [&](bool timed) -> int {
        if (d.start() || (!with_prefill && d.prefill())) return -1;
        if (timed) nvtxRangePushA("iteration");
        cudaCheck(cudaEventRecord(e0, s));
        int err = with_prefill ? d.prefill() : 0;
        cudaCheck(cudaEventRecord(e1, s));
        err = err || d.steps(steps, with_graph);
        cudaCheck(cudaEventRecord(e2, s));
        if (timed) nvtxRangePop();
        if (err || cudaCheck(cudaEventSynchronize(e2))) return -1;
        if (timed) {
            float pre = 0, dec = 0;
            cudaCheck(cudaEventElapsedTime(&pre, e0, e1));
            cudaCheck(cudaEventElapsedTime(&dec, e1, e2));
            iteration_ms.push_back(pre + dec);
            prefill_ms.push_back(pre);
            decode_ms.push_back(dec);
        }
        return 0;
    };

    for (int i = 0; i < warmup; ++i)
        if (iteration(false)) return 1;
    cudaProfilerStart();
    for (int i = 0; i < iters; ++i)
        if (iteration(true)) return 1;
    cudaProfilerStop();
    std::vector<int> tokens;
    if (d.new_tokens(tokens)) return 1;

    KernelTimes kernels;
    int late = 0, units = 0;
    if (kernel_timing) {
        LaunchRecorder& rec = LaunchRecorder::get();
        double hold_ms = 20.0;  // the first unit's: the host's queueing time is not known yet
        // Queues `launch` (a prefill or a step) behind a hold kernel, recording its
        // launches, and waits for it: a host running ahead would fill the stream's
        // queue and then block inside a unit, which would read as a slow host.
        auto recorded = [&](auto&& launch) -> int {
            hold_gpu_kernel<<<1, 1, 0, s>>>((unsigned long long)(hold_ms * 1e6));
            const auto t0 = std::chrono::steady_clock::now();
            rec.enabled = true;
            const int err = launch();
            rec.enabled = false;
            const double queued_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            late += queued_ms > hold_ms;
            ++units;
            hold_ms = std::max(0.1, 2.0 * queued_ms);
            return err || cudaCheck(cudaStreamSynchronize(s)) ? -1 : 0;
        };
        for (int it = 0; it < iters; ++it) {
            rec.reset();
            if (d.start() || (!with_prefill && d.prefill())) return 1;
            int err = with_prefill ? recorded([&] { return d.prefill(); }) : 0;
            for (int i = 0; i < steps && !err; ++i) err = recorded([&] { return d.steps(1, false); });
            if (err || cudaCheck(cudaStreamSynchronize(s)) || kernels.add_iteration(rec.records)) return 1;
        }
        if (late)
            fprintf(stderr, "note: the host took longer to queue %d of %d recorded steps (or prefills) than the hold kernel "
                            "before them; their first launches' event times may include waiting for the host\n", late, units);
    }

    FILE* out = stdout;
    if (args.has("--json") && !(out = fopen(args.str("--json").c_str(), "w"))) {
        fprintf(stderr, "cannot write %s\n", args.str("--json").c_str());
        return 2;
    }
    const GPT2Config& c = model.config;
    const int new_tokens = steps + (with_prefill ? 1 : 0);
    const Stats it = summarize(iteration_ms), dec = summarize(decode_ms);
    fprintf(out, "{\n  \"schema\": \"engine-timing/1\",\n  \"program\": \"gpt2_generate\",\n  \"device\": %s,\n", device_json().c_str());
    fprintf(out, "  \"model\": {\"vocab_size\": %d, \"max_seq_len\": %d, \"num_layers\": %d, \"num_heads\": %d, \"channels\": %d},\n",
            c.vocab_size, c.max_seq_len, c.num_layers, c.num_heads, c.channels);
    fprintf(out, "  \"run\": {\"batch\": 1, \"seq_len\": %d, \"iterations\": %d, \"warmup\": %d, \"prompt_len\": %d, "
                 "\"new_tokens\": %d, \"prefill\": %s, \"graph\": %s, \"graph_steps\": %d, \"overlap\": %s, \"kernel_timing\": %s, \"matmul\": \"%s\", "
                 "\"fusion\": \"%s\", \"attention\": \"%s\", \"decode_attention\": \"%s\"},\n",
            steps, iters, warmup, d.prompt_len(), new_tokens, with_prefill ? "true" : "false", with_graph ? "true" : "false",
            with_graph ? d.graph_steps() : 0,
            overlap && DependentLaunches::supported() ? "true" : "false",
            kernel_timing ? "\"direct steps, each behind a hold kernel\"" : "null", matmul_name(opt.matmul),
            fusion_name(opt.fusion), attention_name(opt.attention), decode_attention_name(opt.decode_attention));
    fprintf(out, "  \"forward_ms\": {%s},\n", stats_json(it, "ms").c_str());
    if (with_prefill) fprintf(out, "  \"prefill_ms\": {%s},\n", stats_json(summarize(prefill_ms), "ms").c_str());
    fprintf(out, "  \"decode_ms\": {%s},\n", stats_json(dec, "ms").c_str());
    fprintf(out, "  \"tokens_per_s\": %.1f,\n  \"decode_tokens_per_s\": %.1f,\n", new_tokens / (it.median * 1e-3),
            steps / (dec.median * 1e-3));
    fprintf(out, "  \"tokens\": [");
    for (size_t i = 0; i < tokens.size(); ++i) fprintf(out, "%s%d", i ? ", " : "", tokens[i]);
    fprintf(out, "],\n");
    kernels.write_json(out, iters);
    fprintf(out, "\n}\n");
    if (out != stdout) fclose(out);
    gpt2_free(model);
    return 0;
}
