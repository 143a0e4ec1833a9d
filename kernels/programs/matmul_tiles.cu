// matmul_tiles: the own matmul kernels (SIMT and tf32x3) at several tile shapes and split-K counts
// against cuBLAS SGEMM, on GPT-2 124M's linear layers (B*T = 4096 and 64).
// Every configuration is first checked against cuBLAS's output (or the tiled
// kernel's without cuBLAS) on the same inputs; a mismatch is reported and that
// configuration is not timed. Then each is timed at split-K 1..4 and at the
// launcher's own choice ("auto"), medians of --reps launches from CUDA events.
// It answers the questions the sweep cannot ask cheaply: which tiles suit which
// shape, and whether the split-K policy picks well. conf.cuh sets the tiles the
// engine itself uses; this program instantiates its own list.
// Prints a table, then one JSON object (schema matmul-tiles/1) on the last line.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../matmul.cuh"
#include "args.h"
#include "bench.h"

namespace {

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int ST>
struct Tiles {
    static std::string name() {
        char b[96];
        snprintf(b, sizeof(b), "%dx%dx%d w%dx%d t%dx%d s%d", BM, BN, BK, WM, WN, TM, TN, ST);
        return b;
    }
    static int run(float* out, const float* A, const float* W, int M, int N, int K, int splits) {
        return matmul_own_sized<BM, BN, BK, WM, WN, TM, TN, ST>(Epilogue::None, out, A, W, nullptr, nullptr, M, N, K, 0, splits);
    }
};

// The 3xTF32 tensor-core kernel (matmul_tf32x3.cuh) at a block x slice x warp tile and pipeline depth.
template <int BM, int BN, int BK, int WM, int WN, int ST>
struct Tf32x3Tiles {
    static std::string name() {
        char b[96];
        snprintf(b, sizeof(b), "tf32x3 %dx%dx%d w%dx%d s%d", BM, BN, BK, WM, WN, ST);
        return b;
    }
    static int run(float* out, const float* A, const float* W, int M, int N, int K, int splits) {
        return matmul_tf32x3_sized<BM, BN, BK, WM, WN, ST>(Epilogue::None, out, A, W, nullptr, nullptr, M, N, K, 0, splits);
    }
};

template <class... Ts>
struct TileList {};

template <class F, class... Ts>
void for_each_tiles(TileList<Ts...>, F&& f) {
    (f(Ts{}), ...);
}

// The candidates: 128x128 at 8x8 per thread with shallower and deeper slices
// and pipelines (conf.cuh's default: 128x128x32, 2 stages), a narrower block for
// N = 768, 8x16 thread tiles (fewer shared-memory reads per FMA, fewer resident
// warps), among them cuBLAS's own SIMT shape (128x128x8, four warps of 64x64,
// 3 stages: 0.71-0.79 of cuBLAS in this kernel on an H100, 2026-11-26), and
// small tiles for short prompts. Then the tf32x3 kernel's: on the H100 its
// 128x128x32 tiles of 64x32 or 32x64 warps ran 0.98-1.26x cuBLAS at B*T 4096,
// 128x64 (the default) and 64x128 of 64x32 warps 0.99-1.42x, 64x64 tiles best
// at 64 rows (1.2-1.8x).
using CANDIDATES = TileList<Tiles<128, 128, 16, 64, 32, 8, 8, 3>,   //
                            Tiles<128, 128, 8, 64, 32, 8, 8, 3>,    //
                            Tiles<128, 128, 16, 64, 32, 8, 8, 2>,   //
                            Tiles<128, 128, 32, 64, 32, 8, 8, 2>,   //
                            Tiles<128, 128, 32, 64, 32, 8, 8, 3>,   //
                            Tiles<128, 64, 16, 64, 32, 8, 8, 3>,    //
                            Tiles<128, 128, 16, 64, 64, 8, 16, 3>,  //
                            Tiles<128, 128, 8, 64, 64, 8, 16, 3>,   //
                            Tiles<128, 128, 8, 64, 64, 8, 16, 4>,   //
                            Tiles<128, 256, 16, 64, 64, 8, 16, 3>,  //
                            Tiles<256, 128, 16, 64, 64, 8, 16, 3>,  //
                            Tiles<64, 128, 16, 32, 64, 8, 8, 3>,    //
                            Tiles<64, 64, 16, 32, 32, 4, 8, 3>,     //
                            Tf32x3Tiles<128, 128, 32, 64, 32, 3>,   //
                            Tf32x3Tiles<128, 128, 32, 64, 32, 4>,   //
                            Tf32x3Tiles<128, 128, 16, 64, 32, 4>,   //
                            Tf32x3Tiles<128, 128, 32, 32, 64, 3>,   //
                            Tf32x3Tiles<128, 64, 32, 64, 32, 4>,    //
                            Tf32x3Tiles<64, 128, 32, 64, 32, 4>,    //
                            Tf32x3Tiles<128, 64, 16, 64, 32, 4>,    //
                            Tf32x3Tiles<64, 128, 32, 32, 32, 4>,    //
                            Tf32x3Tiles<128, 64, 32, 32, 32, 4>,    //
                            Tf32x3Tiles<64, 64, 32, 32, 32, 4>>;

struct Shape {
    int M, N, K;
    const char* what;
};

std::vector<float> host(const float* d, size_t n) {
    std::vector<float> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

// ||got - want|| / ||want||, or infinity when anything is not finite.
double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        num += (double)(got[i] - want[i]) * (got[i] - want[i]);
        den += (double)want[i] * want[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

// The error against exact (FP64) sums at SAMPLES outputs spread over the matrix:
// the largest |got - exact| / sum_k |a_k w_k|, a bound FP32 summation keeps
// under about K * 2^-24 (so 1e-7 to 1e-6 is FP32's order on these shapes).
constexpr int SAMPLES = 4096;

struct Exact {
    std::vector<size_t> at;            // sampled output indices, m * N + n
    std::vector<double> sum, scale;    // exact dot product, sum of |a_k w_k|
};

Exact exact_samples(const std::vector<float>& A, const std::vector<float>& W, int M, int N, int K) {
    Exact e;
    unsigned long long x = 88172645463325252ull;  // xorshift: the same samples every run
    for (int s = 0; s < SAMPLES; ++s) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        const int m = (int)(x % (unsigned long long)M), n = (int)((x >> 32) % (unsigned long long)N);
        double sum = 0, scale = 0;
        for (int k = 0; k < K; ++k) {
            const double t = (double)A[(size_t)m * K + k] * W[(size_t)n * K + k];
            sum += t;
            scale += std::fabs(t);
        }
        e.at.push_back((size_t)m * N + n);
        e.sum.push_back(sum);
        e.scale.push_back(scale);
    }
    return e;
}

double exact_error(const std::vector<float>& got, const Exact& e) {
    double worst = 0;
    for (size_t s = 0; s < e.at.size(); ++s) {
        if (!std::isfinite(got[e.at[s]])) return INFINITY;
        worst = std::max(worst, std::fabs(got[e.at[s]] - e.sum[s]) / std::max(e.scale[s], 1e-30));
    }
    return worst;
}

}  // namespace

int main(int argc, char** argv) {
    Args args("usage: matmul_tiles [--reps N] [--max-rel-error X]", {"--reps", "--max-rel-error"}, {});
    bool ok = args.parse(argc, argv);
    const int reps = args.integer("--reps", 20, 1, 10000, ok);
    const double max_rel = args.real("--max-rel-error", 1e-5, ok);
    if (!ok) return 2;
    cudaDeviceProp prop{};
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("matmul_tiles on %s, median of %d; reference: %s\n", prop.name, reps, matmul_has_cublas() ? "cuBLAS SGEMM" : "tiled kernel");

    const Shape shapes[] = {{4096, 2304, 768, "qkv"},       {4096, 768, 768, "attn proj"}, {4096, 3072, 768, "fc"},
                            {4096, 768, 3072, "fc proj"},   {4096, 50257, 768, "lm head"}, {64, 2304, 768, "qkv T=64"},
                            {64, 768, 3072, "fc proj T=64"}, {64, 50257, 768, "lm head T=64"}};
    const size_t most_a = 4096 * 3072, most_w = 50257 * 768, most_out = 4096 * 50257;
    float *A = device_random(most_a), *W = device_random(most_w), *out = device_random(most_out), *ref = device_random(most_out);
    if (!A || !W || !out || !ref) return 1;
    const std::vector<float> hA = host(A, most_a), hW = host(W, most_w);
    const MatmulImpl ref_impl = matmul_has_cublas() ? MatmulImpl::Cublas : MatmulImpl::Tiled;
    const int splits[] = {0, 1, 2, 3, 4};
    std::string json;
    int failures = 0;

    for (const Shape& s : shapes) {
        const double flop = 2.0 * s.M * s.N * s.K;
        const size_t n_out = (size_t)s.M * s.N;
        if (matmul_forward(ref_impl, ref, A, W, s.M, s.N, s.K, 0) || cudaCheck(cudaDeviceSynchronize())) return 1;
        const std::vector<float> want = host(ref, n_out);
        const Exact exact = exact_samples(hA, hW, s.M, s.N, s.K);
        const double ref_ms = time_ms(reps, [&] { return matmul_forward(ref_impl, ref, A, W, s.M, s.N, s.K, 0); });
        const double ref_tf = flop / (ref_ms * 1e-3) / 1e12;
        printf("\n%s M=%d N=%d K=%d: reference %.3f ms %.2f TFLOP/s (error against FP64 %.1e)\n", s.what, s.M, s.N, s.K,
               ref_ms, ref_tf, exact_error(want, exact));
        printf("  %-28s %9s %9s %9s %9s %9s   best/ref\n", "tiles", "auto", "split 1", "split 2", "split 3", "split 4");
        auto one = [&](auto tiles) {
            using T = decltype(tiles);
            cudaCheck(cudaMemset(out, 0xff, n_out * sizeof(float)));  // NaN: an unwritten output fails the check
            const int st = T::run(out, A, W, s.M, s.N, s.K, 0);
            const bool ran = !st && !cudaCheck(cudaDeviceSynchronize());
            const std::vector<float> got = ran ? host(out, n_out) : std::vector<float>();
            const double err = ran ? rel_error(got, want) : INFINITY, err64 = ran ? exact_error(got, exact) : INFINITY;
            if (!(err <= max_rel)) {
                printf("  %-28s FAIL: relative error %.3g (over %.1g) or launch error; not timed\n", T::name().c_str(), err, max_rel);
                ++failures;
                return;
            }
            double best = 0;
            std::string cells, js;
            for (int sp : splits) {
                const double ms = time_ms(reps, [&] { return T::run(out, A, W, s.M, s.N, s.K, sp); });
                const double tf = ms > 0 ? flop / (ms * 1e-3) / 1e12 : 0;
                best = std::max(best, tf);
                char c[64];
                snprintf(c, sizeof(c), " %9.2f", tf);
                cells += c;
                snprintf(c, sizeof(c), "%s\"%s\": %.3f", js.empty() ? "" : ", ", sp ? std::to_string(sp).c_str() : "auto", tf);
                js += c;
            }
            printf("  %-28s%s   %.3f (rel err %.1e, FP64 %.1e)\n", T::name().c_str(), cells.c_str(), best / ref_tf, err, err64);
            char head[320];
            snprintf(head, sizeof(head), "{\"shape\": \"%s\", \"M\": %d, \"N\": %d, \"K\": %d, \"tiles\": \"%s\", \"ref_tflops\": %.3f, \"rel_error\": %.3g, \"fp64_error\": %.3g, \"tflops\": {",
                     s.what, s.M, s.N, s.K, T::name().c_str(), ref_tf, err, err64);
            json += (json.empty() ? "" : ",\n  ") + std::string(head) + js + "}}";
        };
        for_each_tiles(CANDIDATES{}, one);
    }
    printf("{\"schema\": \"matmul-tiles/1\", \"device\": \"%s\", \"reference\": \"%s\", \"reps\": %d, \"results\": [\n  %s\n]}\n", prop.name,
           matmul_has_cublas() ? "cublas" : "tiled", reps, json.c_str());
    cudaFree(A);
    cudaFree(W);
    cudaFree(out);
    cudaFree(ref);
    return failures ? 1 : 0;
}
