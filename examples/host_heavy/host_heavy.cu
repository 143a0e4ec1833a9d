// host_heavy: a program whose run is mostly host work, for sweeping a kernel that
// runs well under a second in total. It transposes several matrices once each
// with transpose_tiled_kernel and checks every result on the CPU; it opens no
// NVTX range and times nothing itself (a sweep's cupti backend times every
// launch: without NVTX ranges a run is one iteration, every launch counted).
//
//   host_heavy [--sizes 1024x1024,2048x1536,...] [--setup-ms MS] [--check-only]
//              [--iters N] [--warmup W] [--nvtx]   (accepted and ignored)
//
// --sizes LIST   matrices to transpose, each ROWSxCOLS (or N for N x N), once each
// --setup-ms MS  the host set-up (filling the inputs with a PRNG on the CPU) takes at
//                least MS ms: it fills them again until then, on purpose (default 3000)
// --check-only   exit after the early check (0: right, 1: wrong), before the host
//                set-up: a quick `verify:` command
// --iters, --warmup, --nvtx  accepted and ignored: each size is transposed once
//                per run whatever a sweep asks (how a program that does not know
//                a sweep's iteration flags is measured)
//
// Order: the early check (one small shape that is no multiple of any tile, a
// wrong configuration exits 1 before any set-up), the host set-up, then per size:
// copy in, fill the output with a NaN pattern, transpose, copy back, compare every
// element with the input on the CPU (exit 1 at the first wrong one).
#include "transpose.cuh"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int MAX_SIDE = 16384;
constexpr size_t MAX_ELEMS = size_t(1) << 27;   // 512 MB of floats per matrix
constexpr int MAX_SETUP_MS = 600000;

struct Size {
    int rows, cols;
    size_t elems() const { return size_t(rows) * cols; }
};

struct Options {
    std::vector<Size> sizes = {{1024, 1024}, {2048, 1536}, {3000, 2000}, {4096, 4096}, {8192, 2048}};
    int setup_ms = 3000;
    bool check_only = false;
};

bool parse_size(const char* tok, Size& s) {
    char* end = nullptr;
    long r = strtol(tok, &end, 10), c = r;
    if (end == tok) return false;
    if (*end == 'x') {
        const char* rest = end + 1;
        c = strtol(rest, &end, 10);
        if (end == rest) return false;
    }
    if (*end != '\0' || r < 1 || c < 1 || r > MAX_SIDE || c > MAX_SIDE || size_t(r) * size_t(c) > MAX_ELEMS) return false;
    s = {int(r), int(c)};
    return true;
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool has_value = i + 1 < argc;
        if (a == "--check-only") o.check_only = true;
        else if (a == "--setup-ms" && has_value) o.setup_ms = atoi(argv[++i]);
        else if ((a == "--iters" || a == "--warmup") && has_value) ++i;   // ignored: see the header
        else if (a == "--nvtx") {}                                        // ignored: no NVTX ranges
        else if (a == "--sizes" && has_value) {
            o.sizes.clear();
            for (char* tok = strtok(argv[++i], ","); tok; tok = strtok(nullptr, ",")) {
                Size s;
                if (!parse_size(tok, s)) {
                    fprintf(stderr, "host_heavy: bad size '%s': ROWSxCOLS or N, each side 1..%d, at most %zu elements\n",
                            tok, MAX_SIDE, MAX_ELEMS);
                    return false;
                }
                o.sizes.push_back(s);
            }
        } else {
            fprintf(stderr, "host_heavy: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    if (o.sizes.empty() || o.setup_ms < 0 || o.setup_ms > MAX_SETUP_MS) {
        fprintf(stderr, "host_heavy: need at least one size and --setup-ms in 0..%d\n", MAX_SETUP_MS);
        return false;
    }
    return true;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Deterministic inputs in [-1, 1): the same seed fills the same values, however
// often the set-up repeats the fill.
uint32_t fill(std::vector<float>& v, uint32_t seed) {
    for (float& x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = float(seed >> 8) / float(1u << 23) - 1.0f;
    }
    return seed;
}

// One transpose of `in` (s.rows x s.cols, already on the device in dIn), checked
// element by element against `in` on the CPU. dOut is first filled with a NaN
// pattern (all bits set), so an element the kernel never writes cannot pass.
bool transpose_and_check(const Size& s, const std::vector<float>& in, const float* dIn, float* dOut,
                         std::vector<float>& out) {
    out.resize(s.elems());
    if (cudaCheck(cudaMemset(dOut, 0xFF, s.elems() * 4)) || transpose_tiled(s.rows, s.cols, dIn, dOut) ||
        cudaCheck(cudaMemcpy(out.data(), dOut, s.elems() * 4, cudaMemcpyDeviceToHost)))
        return false;
    for (int c = 0; c < s.cols; ++c) {
        for (int r = 0; r < s.rows; ++r) {
            float want = in[size_t(r) * s.cols + c], got = out[size_t(c) * s.rows + r];
            if (memcmp(&want, &got, 4) != 0) {
                fprintf(stderr, "transpose_tiled_kernel (TILE=%d ROWS=%d PAD=%d UNSAFE=%d) is wrong at %dx%d: "
                                "out[%d][%d] = %g, in[%d][%d] = %g\n",
                        HH_TILE, HH_ROWS, HH_PAD, HOST_HEAVY_UNSAFE, s.rows, s.cols, c, r, got, r, c, want);
                return false;
            }
        }
    }
    return true;
}

// Copy `in` to the device and transpose it once, checked.
bool run_one(const Size& s, const std::vector<float>& in, float* dIn, float* dOut, std::vector<float>& out) {
    if (cudaCheck(cudaMemcpy(dIn, in.data(), s.elems() * 4, cudaMemcpyHostToDevice))) return false;
    if (!transpose_and_check(s, in, dIn, dOut, out)) {
        fprintf(stderr, "host_heavy: FAILED the check at %dx%d\n", s.rows, s.cols);
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("host_heavy: TILE=%d ROWS=%d PAD=%d UNSAFE=%d, %d threads, %d B shared memory\n", HH_TILE, HH_ROWS,
           HH_PAD, HOST_HEAVY_UNSAFE, HH_THREADS, HH_SMEM_BYTES);

    size_t largest = 0;
    for (const Size& s : o.sizes) largest = std::max(largest, s.elems());
    const Size edge = {97, 130};   // no multiple of any tile: every edge guard is used
    largest = std::max(largest, edge.elems());
    float *dIn, *dOut;
    if (cudaCheck(cudaMalloc(&dIn, largest * 4)) || cudaCheck(cudaMalloc(&dOut, largest * 4))) return 1;
    std::vector<float> out;

    // The early check: a wrong configuration exits here, before the set-up's seconds.
    std::vector<float> small(edge.elems());
    fill(small, 7);
    if (!run_one(edge, small, dIn, dOut, out)) return 1;
    printf("early check: ok (%dx%d)\n", edge.rows, edge.cols);
    if (o.check_only) return 0;

    // Host set-up, slow on purpose: fill every input, again and again until
    // --setup-ms have passed (each pass writes the same values).
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<float>> inputs(o.sizes.size());
    for (size_t j = 0; j < o.sizes.size(); ++j) inputs[j].resize(o.sizes[j].elems());
    int passes = 0;
    volatile uint32_t sink = 0;   // keeps the repeated fills from being optimised away
    do {
        for (size_t j = 0; j < inputs.size(); ++j) sink = sink + fill(inputs[j], 11 + uint32_t(j));
        ++passes;
    } while (ms_since(t0) < o.setup_ms);
    size_t total = 0;
    for (const Size& s : o.sizes) total += s.elems();
    printf("host set-up: %zu floats (%.0f MB) filled %d times in %.0f ms (--setup-ms %d)\n", total, total * 4 / 1e6,
           passes, ms_since(t0), o.setup_ms);

    for (size_t j = 0; j < o.sizes.size(); ++j) {
        const Size& s = o.sizes[j];
        if (!run_one(s, inputs[j], dIn, dOut, out)) return 1;
        dim3 g = transpose_grid(s.rows, s.cols);
        printf("%dx%d: grid %ux%u, block %dx%d, check ok\n", s.rows, s.cols, g.x, g.y, HH_TILE, HH_ROWS);
    }
    if (cudaCheck(cudaFree(dIn)) || cudaCheck(cudaFree(dOut))) return 1;
    printf("check: ok (%zu sizes and the early check)\n", o.sizes.size());
    return 0;
}
