// gpt2_verify: checks the engine's logits against transformers' (the reference
// file from `python -m gpt2_engine.export`), for every combination of matmul,
// fusion and attention path asked for (all of them by default), so every kernel
// family the launch sizes touch runs at least once (check_logits in checks.h,
// which gpt2_forward --ref runs too). Exit 0 when every
// combination is within --atol of the reference (max abs error over all logits),
// 1 when any is not (or produced NaN), 2 on bad input.
#include <cstdio>
#include <string>
#include <vector>

#include "../common.cuh"
#include "../gpt2.h"
#include "../launchers.h"
#include "args.h"
#include "checks.h"

static const char* kUsage =
    "usage: gpt2_verify --weights FILE --ref FILE [--atol 1e-3]\n"
    "                   [--matmul own,tf32x3,tiled,cublas] [--fusion none,prepare,full] [--attention flash,reference]\n"
    "       each list defaults to every choice this build has";

int main(int argc, char** argv) {
    Args args(kUsage, {"--weights", "--ref", "--atol", "--matmul", "--fusion", "--attention"}, {});
    if (!args.parse(argc, argv) || !args.require("--weights") || !args.require("--ref")) return 2;
    bool ok = true;
    const double atol = args.real("--atol", 1e-3, ok);
    const std::string all_matmuls = matmul_has_cublas() ? "own,tf32x3,tiled,cublas" : "own,tf32x3,tiled";
    std::vector<MatmulImpl> matmuls;
    std::vector<Fusion> fusions;
    std::vector<AttentionImpl> attentions;
    for (const std::string& s : split_list(args.str("--matmul", all_matmuls))) ok = ok && parse_matmul(s, matmuls.emplace_back());
    for (const std::string& s : split_list(args.str("--fusion", "none,prepare,full"))) ok = ok && parse_fusion(s, fusions.emplace_back());
    for (const std::string& s : split_list(args.str("--attention", "flash,reference"))) ok = ok && parse_attention(s, attentions.emplace_back());
    if (!ok) return 2;

    std::vector<EngineOptions> paths;
    for (MatmulImpl mm : matmuls)
        for (Fusion fu : fusions)
            for (AttentionImpl at : attentions) paths.push_back({mm, fu, at});

    GPT2 model;
    GPT2Reference ref;
    if (gpt2_load(model, args.str("--weights")) || gpt2_load_reference(ref, args.str("--ref"))) return 2;
    std::vector<LogitCheck> checks;
    if (check_logits(model, ref, paths, atol, checks)) return ref.V == model.config.vocab_size ? 1 : 2;

    int failures = 0;
    printf("{\"schema\": \"engine-verify/1\", \"device\": %s, \"batch\": %d, \"seq_len\": %d, \"atol\": %g, \"checks\": [", device_json().c_str(),
           ref.B, ref.T, atol);
    for (size_t i = 0; i < checks.size(); ++i) {
        const LogitCheck& c = checks[i];
        failures += !c.pass;
        printf("%s\n  {\"matmul\": \"%s\", \"fusion\": \"%s\", \"attention\": \"%s\", \"max_abs_err\": %.3e, \"max_rel_err\": %.3e, "
               "\"bad\": %zu, \"worst_index\": %zu, \"pass\": %s}",
               i ? "," : "", matmul_name(c.path.matmul), fusion_name(c.path.fusion), attention_name(c.path.attention),
               c.max_abs_err, c.max_rel_err, c.bad, c.worst_index, c.pass ? "true" : "false");
    }
    printf("\n], \"failures\": %d}\n", failures);
    fprintf(stderr, "%s: %d of %zu combinations outside atol=%g\n", failures ? "FAIL" : "PASS", failures, paths.size(), atol);
    gpt2_free(model);
    return failures ? 1 : 0;
}
