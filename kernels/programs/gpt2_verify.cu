// gpt2_verify: checks the engine's logits against transformers' (the reference
// file from `python -m gpt2_engine.export`), for every combination of matmul,
// fusion and attention path asked for (all of them by default), so every kernel
// family the launch sizes touch runs at least once. Exit 0 when every
// combination is within --atol of the reference (max abs error over all logits),
// 1 when any is not (or produced NaN), 2 on bad input.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../common.cuh"
#include "../gpt2.h"
#include "../launchers.h"
#include "args.h"

static const char* kUsage =
    "usage: gpt2_verify --weights FILE --ref FILE [--atol 1e-3]\n"
    "                   [--matmul own,tiled,cublas] [--fusion none,prepare,full] [--attention flash,reference]\n"
    "       each list defaults to every choice this build has";

int main(int argc, char** argv) {
    Args args(kUsage, {"--weights", "--ref", "--atol", "--matmul", "--fusion", "--attention"}, {});
    if (!args.parse(argc, argv) || !args.require("--weights") || !args.require("--ref")) return 2;
    bool ok = true;
    const double atol = args.real("--atol", 1e-3, ok);
    const std::string all_matmuls = matmul_has_cublas() ? "own,tiled,cublas" : "own,tiled";
    std::vector<MatmulImpl> matmuls;
    std::vector<Fusion> fusions;
    std::vector<AttentionImpl> attentions;
    for (const std::string& s : split_list(args.str("--matmul", all_matmuls))) ok = ok && parse_matmul(s, matmuls.emplace_back());
    for (const std::string& s : split_list(args.str("--fusion", "none,prepare,full"))) ok = ok && parse_fusion(s, fusions.emplace_back());
    for (const std::string& s : split_list(args.str("--attention", "flash,reference"))) ok = ok && parse_attention(s, attentions.emplace_back());
    if (!ok) return 2;

    GPT2 model;
    GPT2Reference ref;
    if (gpt2_load(model, args.str("--weights")) || gpt2_load_reference(ref, args.str("--ref"))) return 2;
    if (ref.V != model.config.vocab_size) {
        fprintf(stderr, "reference vocab %d does not match the weights' %d: export both from the same model\n", ref.V,
                model.config.vocab_size);
        return 2;
    }
    if (gpt2_alloc_acts(model, ref.B, ref.T, true)) return 2;
    if (cudaCheck(cudaMemcpy(model.acts.tokens, ref.tokens.data(), ref.tokens.size() * sizeof(int), cudaMemcpyHostToDevice))) return 1;

    const size_t n = ref.logits.size();
    std::vector<float> logits(n);
    int failures = 0;
    printf("{\"schema\": \"engine-verify/1\", \"device\": %s, \"batch\": %d, \"seq_len\": %d, \"atol\": %g, \"checks\": [", device_json().c_str(),
           ref.B, ref.T, atol);
    bool first = true;
    for (MatmulImpl mm : matmuls)
        for (Fusion fu : fusions)
            for (AttentionImpl at : attentions) {
                const EngineOptions opt{mm, fu, at};
                // Poison the logits so an output the engine never writes cannot pass.
                if (cudaCheck(cudaMemset(model.acts.logits, 0xff, n * sizeof(float)))) return 1;
                if (gpt2_forward(model, model.acts.tokens, ref.B, ref.T, opt, 0) || cudaCheck(cudaDeviceSynchronize())) return 1;
                if (cudaCheck(cudaMemcpy(logits.data(), model.acts.logits, n * sizeof(float), cudaMemcpyDeviceToHost))) return 1;
                double max_abs = 0, max_rel = 0;
                size_t bad = 0, worst = 0;
                for (size_t i = 0; i < n; ++i) {
                    const double d = std::fabs((double)logits[i] - ref.logits[i]);
                    if (!(d <= atol)) ++bad;  // NaN counts as bad
                    if (!(d <= max_abs)) { max_abs = std::isnan(d) ? INFINITY : d; worst = i; }
                    max_rel = std::fmax(max_rel, d / std::fmax(std::fabs((double)ref.logits[i]), 1e-6));
                }
                const bool pass = bad == 0;
                failures += !pass;
                printf("%s\n  {\"matmul\": \"%s\", \"fusion\": \"%s\", \"attention\": \"%s\", \"max_abs_err\": %.3e, \"max_rel_err\": %.3e, "
                       "\"bad\": %zu, \"worst_index\": %zu, \"pass\": %s}",
                       first ? "" : ",", matmul_name(mm), fusion_name(fu), attention_name(at), max_abs, max_rel, bad, worst,
                       pass ? "true" : "false");
                first = false;
                fflush(stdout);
            }
    printf("\n], \"failures\": %d}\n", failures);
    fprintf(stderr, "%s: %d of %zu combinations outside atol=%g\n", failures ? "FAIL" : "PASS", failures,
            matmuls.size() * fusions.size() * attentions.size(), atol);
    gpt2_free(model);
    return failures ? 1 : 0;
}
