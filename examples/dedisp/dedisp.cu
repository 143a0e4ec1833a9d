// dedisp: checks dedisp_kernel (the configuration conf.cuh names) against the
// reference, then times it at one problem size.
//
//   dedisp [--samples N] [--dms N] [--channels N] [--iters N] [--warmup W] [--nvtx] [--check-only] [--json FILE]
//
// --samples N    output samples per DM (default 8192)
// --dms N        trial DMs (default 2048); the largest shift must fit the input's slack
// --channels N   frequency channels (default 256)
// --iters N      timed launches
// --warmup W     untimed launches first (outside any NVTX range)
// --nvtx         wrap each timed launch in an NVTX range named "iteration"
// --check-only   exit after the correctness check (0: right, 1: wrong)
// --json FILE    write the event timing of every launch as engine-timing/1 JSON
//                (what the sweep's events backend reads)
//
// The check runs first, every time, at the timed size: a sweep's
// `verify: profile` needs no separate check run (exit 1 before any timing).
#include "dedisp.cuh"
#include "inputs.cuh"
#include "run_options.cuh"
#include "timed_run.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Options : RunOptions {
    DedispProblem p;
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool has_value = i + 1 < argc;
        if (take_run_option(argc, argv, i, o)) continue;
        if (a == "--samples" && has_value) o.p.samples = atoi(argv[++i]);
        else if (a == "--dms" && has_value) o.p.dms = atoi(argv[++i]);
        else if (a == "--channels" && has_value) o.p.channels = atoi(argv[++i]);
        else {
            fprintf(stderr, "dedisp: unknown or incomplete argument '%s'\n", a.c_str());
            return false;
        }
    }
    // 4096 channels keep every sum (at most 4096 * 255) below 2^24, exact in fp32.
    const DedispProblem& p = o.p;
    if (p.samples < 1 || p.samples > (1 << 20) || p.dms < 1 || p.dms > 65536 || p.channels < 1 || p.channels > 4096 ||
        o.iters < 1 || o.warmup < 0) {
        fprintf(stderr, "dedisp: need --samples 1..1048576, --dms 1..65536, --channels 1..4096, --iters >= 1, "
                        "--warmup >= 0\n");
        return false;
    }
    if (dedisp_delays(p).empty()) {
        // The lowest channel shifts most: (dms - 1) * delay[0] must stay below the row's slack.
        DedispProblem one = p;
        one.dms = 1;
        double d0 = dedisp_delays(one)[0];
        int most = int((p.max_shift - 1) / d0);
        while (most > 0 && most * d0 + 1 >= p.max_shift) --most;
        fprintf(stderr, "dedisp: at --channels %d the largest shift, (dms - 1) * %.4f samples, must stay below %d: "
                        "lower --dms to at most %d (or --channels)\n", p.channels, d0, p.max_shift, most + 1);
        return false;
    }
    return true;
}

// A channel's shift as the kernels compute it (dedisp_shift): the float product
// rounded to nearest, as __fmul_rn does and as the host's IEEE float multiply
// does (no -ffast-math here), then truncated toward zero, as __float2int_rz.
int host_shift(int dm, float delay) { return int(float(dm) * delay); }

// Every output of the kernel against the reference kernel's, for equality:
// each is a sum of at most 4096 bytes, an integer below 2^24, which fp32 holds
// exactly at every step, so any order of summation gives the same bits. The
// reference is spot-checked on the CPU (in integers), so a bug the two kernels
// share is caught too. Both outputs start as NaN (all bytes 0xff), so one
// that is never written fails the comparison.
bool check(const DedispProblem& p, const uint8_t* dIn, const float* dDelay, float* dOut, float* dRef,
           const std::vector<uint8_t>& in, const std::vector<float>& delay) {
    size_t elems = size_t(p.dms) * p.samples;
    if (cudaCheck(cudaMemset(dOut, 0xff, elems * 4)) || cudaCheck(cudaMemset(dRef, 0xff, elems * 4)) ||
        dedisp(p, dIn, dDelay, dOut) || dedisp_reference(p, dIn, dDelay, dRef))
        return false;
    std::vector<float> out(elems), ref(elems);
    if (cudaCheck(cudaMemcpy(out.data(), dOut, elems * 4, cudaMemcpyDeviceToHost)) ||
        cudaCheck(cudaMemcpy(ref.data(), dRef, elems * 4, cudaMemcpyDeviceToHost)))
        return false;
    for (int probe = 0; probe < 32; ++probe) {
        // The last probe is the last output: the last sample at the largest shift.
        int s = probe == 31 ? p.samples - 1 : int((probe * 7919u) % unsigned(p.samples));
        int dm = probe == 31 ? p.dms - 1 : int((probe * 104729u) % unsigned(p.dms));
        int want = 0;
        for (int c = 0; c < p.channels; ++c) want += in[size_t(c) * p.row() + s + host_shift(dm, delay[c])];
        float got = ref[size_t(dm) * p.samples + s];
        if (!(got == float(want))) {
            fprintf(stderr, "dedisp_reference_kernel is wrong at out[%d][%d] = %g, the CPU says %d\n", dm, s, got, want);
            return false;
        }
    }
    for (size_t i = 0; i < elems; ++i) {
        if (!(out[i] == ref[i])) {
            fprintf(stderr, "dedisp_kernel is wrong at out[%zu][%zu] = %g, the reference says %g\n", i / p.samples,
                    i % p.samples, out[i], ref[i]);
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) return 2;
    printf("dedisp: BLOCK_X=%d BLOCK_Y=%d TILE_X=%d TILE_Y=%d STRIDE_X=%d STRIDE_Y=%d, %d threads\n", DEDISP_BLOCK_X,
           DEDISP_BLOCK_Y, DEDISP_TILE_X, DEDISP_TILE_Y, DEDISP_STRIDE_X, DEDISP_STRIDE_Y, DEDISP_THREADS);
    const DedispProblem& p = o.p;
    std::vector<uint8_t> in = dedisp_input(p);
    std::vector<float> delay = dedisp_delays(p);
    size_t elems = size_t(p.dms) * p.samples;
    uint8_t* dIn;
    float *dDelay, *dOut, *dRef;
    if (cudaCheck(cudaMalloc(&dIn, in.size())) || cudaCheck(cudaMalloc(&dDelay, delay.size() * 4)) ||
        cudaCheck(cudaMalloc(&dOut, elems * 4)) || cudaCheck(cudaMalloc(&dRef, elems * 4)) ||
        cudaCheck(cudaMemcpy(dIn, in.data(), in.size(), cudaMemcpyHostToDevice)) ||
        cudaCheck(cudaMemcpy(dDelay, delay.data(), delay.size() * 4, cudaMemcpyHostToDevice)))
        return 1;
    if (!check(p, dIn, dDelay, dOut, dRef, in, delay)) {
        fprintf(stderr, "dedisp: FAILED the check at %d samples x %d DMs x %d channels\n", p.samples, p.dms,
                p.channels);
        return 1;
    }
    printf("check: ok\n");
    if (o.check_only) return 0;

    dim3 grid(CEIL_DIV(p.samples, DEDISP_BLOCK_X * DEDISP_TILE_X), CEIL_DIV(p.dms, DEDISP_BLOCK_Y * DEDISP_TILE_Y));
    double median_ms;
    if (!time_one_kernel(o, "dedisp", "dedisp_kernel", grid, dim3(DEDISP_BLOCK_X, DEDISP_BLOCK_Y),
                         [&] { return dedisp(p, dIn, dDelay, dOut); }, median_ms))
        return 1;
    // The bytes the sums read (each input byte once per output it feeds), not DRAM traffic.
    double bytes = double(p.samples) * p.dms * p.channels;
    printf("samples=%d dms=%d channels=%d: median %.4f ms, %.1f GB/s of input read over %d launches\n", p.samples,
           p.dms, p.channels, median_ms, bytes / (median_ms * 1e6), o.iters);
    cudaFree(dIn);
    cudaFree(dDelay);
    cudaFree(dOut);
    cudaFree(dRef);
    return 0;
}
