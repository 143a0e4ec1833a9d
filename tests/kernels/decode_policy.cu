// Host-only: the decoding matvec's host-side rules in kernels/matvec_rules.cuh (no GPU needed,
// no CUDA call).
//   decode_policy M C HEADS MAXT  ->  "ATTENDS WARP_NORM" (0 or 1 each)
// ATTENDS: matvec_decode_attends, the attention folded into the qkv matvec, for M rows of
// C channels in HEADS heads and a cache of MAXT positions; WARP_NORM: matvec_warp_norm at
// one warp a column, each warp LayerNorming the row.
//   decode_policy accepts EPILOGUE KV ATTENTION [PICK]  ->  1 or 0 (and the refusal on stderr)
// matvec_splitk_accepts for GPT-2 124M's qkv shape at batch 1 with the LayerNorm folded
// in, an epilogue (none, bias, gelu, residual) and, where KV / ATTENTION / PICK are 1, a
// KV-cache write, the attention in its tail and the LM head's token pick (pointers that are
// never dereferenced).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "matvec_rules.cuh"

int main(int argc, char** argv) {
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "accepts") == 0) {
        const char* names[] = {"none", "bias", "gelu", "residual"};
        const Epilogue epilogues[] = {Epilogue::None, Epilogue::Bias, Epilogue::BiasGelu, Epilogue::BiasResidual};
        int e = 0;
        while (e < 4 && strcmp(argv[2], names[e])) ++e;
        if (e == 4) { fprintf(stderr, "epilogue %s: expected none, bias, gelu or residual\n", argv[2]); return 2; }
        static float buffer[4];
        static int pos;
        static unsigned int counters[12];
        static unsigned long long best;
        static int token;
        KVWrite kv;
        TokenPick pick;
        if (argc == 6 && atoi(argv[5])) pick = TokenPick{&best, &token, nullptr, &pos, 64};
        if (atoi(argv[3])) kv = KVWrite{buffer, buffer, &pos, 12, 64};
        if (atoi(argv[4])) {
            kv.attention = buffer;
            kv.counters = counters;
        }
        const bool ok = matvec_splitk_accepts(epilogues[e], buffer, 1, 8, 3 * 768, 768, 0, 8, RowNorm{buffer, buffer, 1e-5f}, kv,
                                              pick);
        printf("%d\n", ok ? 1 : 0);
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: decode_policy M C HEADS MAXT | decode_policy accepts EPILOGUE KV ATTENTION [PICK]\n");
        return 2;
    }
    const int M = atoi(argv[1]), C = atoi(argv[2]), heads = atoi(argv[3]), maxT = atoi(argv[4]);
    printf("%d %d\n", matvec_decode_attends(M, C, heads, maxT) ? 1 : 0, matvec_warp_norm(M, C, 1) ? 1 : 0);
    return 0;
}
