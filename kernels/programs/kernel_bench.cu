// kernel_bench: the engine's kernels against this GPU's own ceilings, measured in
// the same run:
//   - copy bandwidth: cudaMemcpyAsync device-to-device (bytes read + written);
//   - every memory-bound kernel at each block size in BLOCKS (instantiated here,
//     so one build covers the sweep's range), on arrays well past L2, as GB/s and
//     a fraction of copy bandwidth: the minimum bytes each must move over its time;
//   - the matmul kernels on GPT-2 124M's shapes at B*T = 4096, as TFLOP/s and a
//     fraction of cuBLAS SGEMM (FP32, no TF32) when the build has cuBLAS;
//   - flash attention against the reference path at B=4, T=1024.
// Times are medians of --reps launches after warm-up, from CUDA events.
// Prints a table, then one JSON object (schema engine-bench/1) on the last line.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../attention.cuh"
#include "../encoder.cuh"
#include "../gelu.cuh"
#include "../layernorm.cuh"
#include "../matmul.cuh"
#include "../prepare.cuh"
#include "../residual.cuh"
#include "../residual_layernorm.cuh"
#include "../softmax.cuh"
#include "args.h"
#include "bench.h"
#include "stats.h"

namespace {

int reps = 20;
std::string json;

void add_json(const std::string& row) { json += (json.empty() ? "" : ",\n  ") + row; }

template <int... Bs>
struct Blocks {};
using BLOCKS = Blocks<32, 64, 128, 256, 512, 1024>;

// Times make(BLOCK) for every block size; prints and records the best.
template <int... Bs>
void bandwidth_sweep(const char* kernel, double bytes, double copy_gbs, Blocks<Bs...>, const std::function<std::function<int()>(int)>& make) {
    double best_gbs = 0;
    int best_block = 0;
    std::string per_block;
    for (int block : {Bs...}) {
        const double ms = time_ms(reps, make(block));
        const double gbs = bytes / (ms * 1e-3) / 1e9;
        per_block += (per_block.empty() ? "" : ", ") + std::string("\"") + std::to_string(block) + "\": " + std::to_string(gbs);
        if (gbs > best_gbs) { best_gbs = gbs; best_block = block; }
    }
    printf("%-24s best block %4d  %8.1f GB/s  %5.1f%% of copy\n", kernel, best_block, best_gbs, 100 * best_gbs / copy_gbs);
    char row[256];
    snprintf(row, sizeof(row), "{\"kind\": \"bandwidth\", \"kernel\": \"%s\", \"best_block\": %d, \"gbs\": %.1f, \"fraction_of_copy\": %.4f, \"by_block\": {",
             kernel, best_block, best_gbs, best_gbs / copy_gbs);
    add_json(row + per_block + "}}");
}

// Dispatches a runtime block size to a template instantiation.
template <template <int> class F, int... Bs, typename... Args>
std::function<int()> by_block(int block, Blocks<Bs...>, Args... args) {
    std::function<int()> out;
    ((block == Bs ? (out = [=] { return F<Bs>::run(args...); }, 0) : 0), ...);
    return out;
}

template <int B> struct Residual { static int run(float* o, float* a, float* b, int n) { return residual_forward_sized<B>(o, a, b, n, 0); } };
template <int B> struct Gelu { static int run(float* o, float* a, int n) { return gelu_forward_sized<B>(o, a, n, 0); } };
template <int B> struct PrepareBias { static int run(float* o, float* b, int n, int oc) { return prepare_forward_sized<B>(Epilogue::Bias, o, b, nullptr, n, oc, 0); } };
template <int B> struct PrepareGelu { static int run(float* o, float* b, int n, int oc) { return prepare_forward_sized<B>(Epilogue::BiasGelu, o, b, nullptr, n, oc, 0); } };
template <int B> struct PrepareRes { static int run(float* o, float* b, float* r, int n, int oc) { return prepare_forward_sized<B>(Epilogue::BiasResidual, o, b, r, n, oc, 0); } };
template <int B> struct Layernorm { static int run(float* o, float* x, float* w, float* b, int rows, int c) { return layernorm_forward_sized<B>(o, x, w, b, rows, c, 1e-5f, 0); } };
template <int B> struct ResLn { static int run(float* xo, float* ln, float* x, float* y, float* yb, float* w, float* b, int rows, int c) { return residual_layernorm_forward_sized<B>(xo, ln, x, y, yb, w, b, rows, c, 1e-5f, 0); } };

}  // namespace

int main(int argc, char** argv) {
    Args args("usage: kernel_bench [--reps N] [--only bandwidth|matmul|attention] [--size-log2 N]\n"
              "  --size-log2: floats per array for the bandwidth kernels (default 26: far past L2)",
              {"--reps", "--only", "--size-log2"}, {});
    bool ok = args.parse(argc, argv);
    reps = args.integer("--reps", 20, 1, 10000, ok);
    const int size_log2 = args.integer("--size-log2", 26, 12, 28, ok);
    const std::string only = args.str("--only", "");
    if (!ok) return 2;
    if (!only.empty() && only != "bandwidth" && only != "matmul" && only != "attention") {
        fprintf(stderr, "--only %s: expected bandwidth, matmul or attention\n", only.c_str());
        return 2;
    }
    auto wanted = [&](const char* part) { return only.empty() || only == part; };
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    printf("kernel_bench on %s, median of %d\n", prop.name, reps);

    // Copy ceiling: 1 GiB each way.
    const size_t copy_bytes = 1ull << 30;
    float *src = device_random(copy_bytes / 4), *dst;
    cudaCheck(cudaMalloc(&dst, copy_bytes));
    const double copy_ms = time_ms(reps, [&] { return (int)cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); });
    const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
    printf("%-24s %8.1f GB/s (read + write)\n", "device-to-device copy", copy_gbs);
    char row[256];
    snprintf(row, sizeof(row), "{\"kind\": \"copy\", \"gbs\": %.1f}", copy_gbs);
    add_json(row);
    cudaFree(src);
    cudaFree(dst);

    // Memory-bound kernels on 2^size_log2 floats (by default 256 MiB per array, far past L2).
    const int n = 1 << size_log2, C = 768, rows = n / C, n_rows = rows * C;
    if (wanted("bandwidth")) {
    float *a = device_random(n), *b = device_random(n), *o = device_random(n), *o2 = device_random(n);
    float *bias = device_random(4 * C), *w = device_random(C, 0.5f, 1.5f);
    bandwidth_sweep("residual_kernel", 12.0 * n, copy_gbs, BLOCKS{}, [&](int blk) { return by_block<Residual>(blk, BLOCKS{}, o, a, b, n); });
    bandwidth_sweep("gelu_kernel", 8.0 * n, copy_gbs, BLOCKS{}, [&](int blk) { return by_block<Gelu>(blk, BLOCKS{}, o, a, n); });
    bandwidth_sweep("prepare_bias_kernel", 8.0 * n, copy_gbs, BLOCKS{}, [&](int blk) { return by_block<PrepareBias>(blk, BLOCKS{}, o, bias, n, 4 * C); });
    bandwidth_sweep("prepare_gelu_kernel", 8.0 * n, copy_gbs, BLOCKS{}, [&](int blk) { return by_block<PrepareGelu>(blk, BLOCKS{}, o, bias, n, 4 * C); });
    bandwidth_sweep("prepare_residual_kernel", 12.0 * n, copy_gbs, BLOCKS{}, [&](int blk) { return by_block<PrepareRes>(blk, BLOCKS{}, o, bias, a, n, C); });
    bandwidth_sweep("layernorm_kernel", 8.0 * n_rows, copy_gbs, BLOCKS{}, [&](int blk) { return by_block<Layernorm>(blk, BLOCKS{}, o, a, w, bias, rows, C); });
    bandwidth_sweep("residual_layernorm_kernel", 16.0 * n_rows, copy_gbs, BLOCKS{},
                    [&](int blk) { return by_block<ResLn>(blk, BLOCKS{}, o, o2, a, b, bias, w, bias, rows, C); });
    {  // encoder: every token distinct (a permutation), so each embedding row is read once from
       // memory; the minimum traffic is the token rows, the position rows once, the output once.
        const int V = 50257, Tt = std::min(1024, n / C), Bt = std::max(1, std::min(n / (Tt * C), V / Tt));
        float *wte = device_random((size_t)V * C), *wpe = device_random((size_t)Tt * C);
        std::vector<int> tok(V);
        for (int i = 0; i < V; ++i) tok[i] = i;
        std::shuffle(tok.begin(), tok.end(), std::mt19937(7));
        tok.resize((size_t)Bt * Tt);
        int* dtok;
        cudaCheck(cudaMalloc(&dtok, tok.size() * 4));
        cudaCheck(cudaMemcpy(dtok, tok.data(), tok.size() * 4, cudaMemcpyHostToDevice));
        const dim3 shapes[] = {dim3(ENCODER_BLOCK_X, ENCODER_BLOCK_Y, ENCODER_BLOCK_Z), dim3(5, 5, 5), dim3(32, 4, 1),
                               dim3(64, 4, 1), dim3(128, 2, 1), dim3(192, 1, 1), dim3(256, 1, 1)};
        double best_gbs = 0;
        dim3 best(0, 0, 0);
        std::string per_block;
        for (const dim3& sh : shapes) {
            const double ms = time_ms(reps, [&] { return encoder_launch(sh, o, dtok, wte, wpe, nullptr, Bt, Tt, C, 0); });
            const double bytes = 4.0 * C * (2.0 * Bt * Tt + Tt);  // token rows + output, position rows once
            const double gbs = bytes / (ms * 1e-3) / 1e9;
            char key[64];
            snprintf(key, sizeof(key), "%s\"%ux%ux%u\": %.1f", per_block.empty() ? "" : ", ", sh.x, sh.y, sh.z, gbs);
            per_block += key;
            if (gbs > best_gbs) { best_gbs = gbs; best = sh; }
        }
        printf("%-24s best block %ux%ux%u  %8.1f GB/s  %5.1f%% of copy\n", "encoder_kernel", best.x, best.y, best.z, best_gbs,
               100 * best_gbs / copy_gbs);
        snprintf(row, sizeof(row), "{\"kind\": \"bandwidth\", \"kernel\": \"encoder_kernel\", \"best_block\": \"%ux%ux%u\", \"gbs\": %.1f, \"fraction_of_copy\": %.4f, \"by_block\": {",
                 best.x, best.y, best.z, best_gbs, best_gbs / copy_gbs);
        add_json(row + per_block + "}}");
        cudaFree(wte);
        cudaFree(wpe);
        cudaFree(dtok);
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(o);
    cudaFree(o2);
    }

    // Matmuls at GPT-2 124M's shapes, B*T = 4096.
    if (wanted("matmul")) {
    const int M = 4096;
    const int shapes[][2] = {{3 * C, C}, {C, C}, {4 * C, C}, {C, 4 * C}, {50257, C}};
    float* A = device_random((size_t)M * 4 * C);
    float* W = device_random((size_t)50257 * C);
    float* out = device_random((size_t)M * 50257);
    for (const auto& shape : shapes) {
        const int N = shape[0], K = shape[1];
        const double flop = 2.0 * M * N * K;
        double ms_ref = -1;
        if (matmul_has_cublas()) ms_ref = time_ms(reps, [&] { return matmul_forward(MatmulImpl::Cublas, out, A, W, M, N, K, 0); });
        for (const auto& [impl_, name] :
             {std::pair{MatmulImpl::Own, "own"}, std::pair{MatmulImpl::Tf32x3, "tf32x3"}, std::pair{MatmulImpl::Tiled, "tiled"}}) {
            const MatmulImpl impl = impl_;
            const double ms = time_ms(reps, [&] { return matmul_forward(impl, out, A, W, M, N, K, 0); });
            const double tf = flop / (ms * 1e-3) / 1e12, tf_ref = ms_ref > 0 ? flop / (ms_ref * 1e-3) / 1e12 : 0;
            printf("matmul %-6s M=%d N=%-5d K=%-4d %7.2f TFLOP/s   cuBLAS %7.2f TFLOP/s   ratio %.3f\n", name, M, N, K, tf, tf_ref,
                   tf_ref > 0 ? tf / tf_ref : 0.0);
            snprintf(row, sizeof(row), "{\"kind\": \"matmul\", \"impl\": \"%s\", \"M\": %d, \"N\": %d, \"K\": %d, \"tflops\": %.3f, \"cublas_tflops\": %.3f}",
                     name, M, N, K, tf, tf_ref);
            add_json(row);
        }
    }
    cudaFree(A);
    cudaFree(W);
    cudaFree(out);
    }

    if (wanted("attention")) {  // attention at B=4, T=1024, NH=12, HS=64 (causal: half the score matrix)
        const int Ba = 4, Ta = 1024, NH = 12, HS = 64, Ca = NH * HS;
        float* qkv = device_random((size_t)Ba * Ta * 3 * Ca);
        float* aout = device_random((size_t)Ba * Ta * Ca);
        float *pre, *att;
        cudaCheck(cudaMalloc(&pre, (size_t)Ba * NH * Ta * Ta * 4));
        cudaCheck(cudaMalloc(&att, (size_t)Ba * NH * Ta * Ta * 4));
        const double flop = 4.0 * Ba * NH * (double)Ta * Ta * HS / 2;
        const double ms_flash = time_ms(reps, [&] { return attention_flash_forward(aout, qkv, Ba, Ta, NH, HS, 0); });
        const double ms_ref = time_ms(reps, [&] {
            int st = attention_qk_forward(pre, qkv, Ba, Ta, NH, HS, 0);
            st = st ? st : softmax_forward(att, pre, Ba * NH * Ta, Ta, 0);
            return st ? st : attention_av_forward(aout, att, qkv, Ba, Ta, NH, HS, 0);
        });
        printf("attention flash %.3f ms (%.2f TFLOP/s causal)   reference %.3f ms   speed-up %.1fx\n", ms_flash,
               flop / (ms_flash * 1e-3) / 1e12, ms_ref, ms_ref / ms_flash);
        snprintf(row, sizeof(row), "{\"kind\": \"attention\", \"flash_ms\": %.4f, \"reference_ms\": %.4f, \"flash_tflops\": %.3f}", ms_flash, ms_ref,
                 flop / (ms_flash * 1e-3) / 1e12);
        add_json(row);
        cudaFree(qkv);
        cudaFree(aout);
        cudaFree(pre);
        cudaFree(att);
    }
    printf("{\"schema\": \"engine-bench/1\", \"device\": \"%s\", \"reps\": %d, \"results\": [\n  %s\n]}\n", prop.name, reps, json.c_str());
    return 0;
}
