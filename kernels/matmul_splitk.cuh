// matmul_splitk.cuh: what the own matmul kernels (matmul.cuh's SIMT kernel and
// matmul_tf32x3.cuh's) share around their tiles: how many slices K is split
// into (a model of the device's rates), the workspace for the partial tiles,
// the reduction that sums them in a fixed order and applies the epilogue, and
// the driver that launches a tile kernel that way. No launch sizes of its own:
// the reduction's block is matmul.cuh's MATMUL_SPLITK_BLOCK_SIZE, which
// includes this after its macros.
#pragma once
#include <algorithm>
#include <type_traits>

#include "common.cuh"

// out[i] = epilogue(sum over s of partial[s * MN + i]), summed in order (deterministic, unlike atomics).
template <Epilogue E>
__global__ void matmul_splitk_reduce_kernel(float* out, const float* __restrict__ partial, const float* __restrict__ bias,
                                            const float* residual, long long MN, int N, int S) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= MN) return;
    float v = 0.0f;
    for (int s = 0; s < S; ++s) v += partial[s * MN + i];
    out[i] = epilogue_apply<E>(v, bias, (int)(i % N), residual, i);
}

// The rates the split-K choice weighs: how fast one multiprocessor does FMAs
// (at 60% of its FP32 peak, what a good SIMT tile reaches) and how fast device
// memory moves bytes (at 80% of its peak). Plain numbers, so the choice can be
// checked for any GPU without one (tests/kernels/split_k_picks.cu).
struct MatmulDeviceRates {
    int sms = 1;
    double sm_flops = 0, mem_bytes = 0;  // per second; 0 when the device does not say

    // From what cudaDeviceGetAttribute reports: clocks in kHz, the bus in bits.
    static MatmulDeviceRates from(int sms, int clock_khz, int mem_clock_khz, int bus_bits, int cc_major, int cc_minor) {
        const int lanes = cc_major == 8 && cc_minor == 0 ? 64 : 128;  // FP32 lanes per multiprocessor (A100: 64)
        MatmulDeviceRates r;
        r.sms = sms > 0 ? sms : 1;
        r.sm_flops = 0.6 * 2.0 * lanes * clock_khz * 1e3;
        r.mem_bytes = 0.8 * 2.0 * mem_clock_khz * 1e3 * bus_bits / 8.0;  // double data rate
        return r;
    }
};

// How many K slices (split-K) a grid of `tiles` BM x BN tiles gets. Blocks are
// handed to multiprocessors as they free up, so a multiprocessor's share of
// the work is ceil(tiles * S / SMs) blocks of K/S each; splitting evens out a
// grid that divides badly over the SMs (192 tiles on 132 SMs: the busiest
// does two tiles, the average 1.45) or that has fewer tiles than SMs (a
// 64-token prompt: 6 to 24), at the cost of writing and re-reading S partial
// tiles. The modelled time, compute share plus that traffic, is minimised;
// on GPT-2's shapes it picked the S that matmul_tiles measured fastest.
inline int matmul_split_k_for(const MatmulDeviceRates& r, long long tiles, int BM, int BN, int BK, long long M, long long N,
                              int K) {
    if (r.sm_flops <= 0) return 1;
    const bool know_memory = r.mem_bytes > 0;  // if not, split only a grid smaller than the GPU, the traffic unweighed
    if (!know_memory && tiles >= r.sms) return 1;
    const int max_slices = std::max(1, std::min(32, K / (4 * BK)));  // each slice walks at least 4 slices of BK
    int best = 1;
    double best_s = 0;
    for (int S = 1; S <= max_slices; ++S) {
        const int chunk = CEIL_DIV(CEIL_DIV(K, S), BK) * BK, slices = CEIL_DIV(K, chunk);
        if (slices != S) continue;  // rounding to whole BK slices gave a smaller count, already costed
        const double per_sm = (double)((tiles * S + r.sms - 1) / r.sms);
        const double compute = per_sm * 2.0 * BM * BN * chunk / r.sm_flops;
        const double reduce = S > 1 && know_memory ? (2.0 * S + 1) * M * N * sizeof(float) / r.mem_bytes : 0;
        if (S == 1 || compute + reduce < best_s) { best = S; best_s = compute + reduce; }
    }
    return best;
}

// This GPU's rates, read once.
inline const MatmulDeviceRates& matmul_device_rates() {
    static const MatmulDeviceRates rates = [] {
        int dev = 0, sms = 0, clock_khz = 0, mem_khz = 0, bus_bits = 0, major = 0, minor = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
        cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev);
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
        cudaGetLastError();  // an attribute a device lacks is not an error here: the rate stays 0, and K is never split
        return MatmulDeviceRates::from(sms, clock_khz, mem_khz, bus_bits, major, minor);
    }();
    return rates;
}

// Scratch for split-K partial tiles; grows, never shrinks (one per process).
inline float* matmul_workspace(size_t floats) {
    static float* ws = nullptr;
    static size_t have = 0;
    if (floats > have) {
        if (ws) cudaFree(ws);
        ws = nullptr;
        have = 0;
        if (cudaCheck(cudaMalloc(&ws, floats * sizeof(float)))) return nullptr;
        have = floats;
    }
    return ws;
}

// Lets KERNEL use `bytes` of dynamic shared memory (over 48 KB needs an opt-in)
// and checks that a block of it fits a multiprocessor; once per kernel.
template <auto KERNEL>
bool matmul_kernel_fits(size_t bytes, int threads) {
    static int fits = -1;
    if (fits >= 0) return fits;
    int optin = 0, resident = 0;
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    if (bytes > (size_t)optin) {
        fprintf(stderr, "matmul: its tiles need %zu bytes of shared memory a block, over this GPU's %d; lower the "
                        "STAGES or BK of its conf.cuh tiles (MATMUL_* or MATMUL_TF32X3_*)\n", bytes, optin);
        return fits = 0;
    }
    if (cudaCheck(cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes)) ||
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, KERNEL, threads, bytes)))
        return fits = 0;
    if (!resident)
        fprintf(stderr, "matmul: no block of %d threads with %zu bytes of shared memory fits a multiprocessor; use smaller MATMUL tiles\n",
                threads, bytes);
    return fits = resident > 0;
}

// Runs a tile kernel over the M x N grid of BM x BN tiles: K split into slices as
// matmul_split_k_for says (`splits` > 0 forces that many; matmul_tiles measures
// the model so), the partial tiles then summed by matmul_splitk_reduce_kernel,
// which applies the epilogue. launch(ep, grid, dst, k_chunk) launches the
// kernel with epilogue ep.value (None when K is split) writing to dst.
template <int BM, int BN, int BK, class Launch>
int matmul_split_k_run(Epilogue e, float* out, const float* bias, const float* residual, int M, int N, int K,
                       cudaStream_t stream, int splits, Launch&& launch) {
    dim3 grid(CEIL_DIV(N, BN), CEIL_DIV(M, BM), 1);
    if (grid.y > 65535) { fprintf(stderr, "matmul: M=%d needs %u row blocks, over CUDA's 65535\n", M, grid.y); return -1; }
    if (e != Epilogue::None && !bias) { fprintf(stderr, "matmul: a bias epilogue needs a bias\n"); return -1; }
    int slices = splits > 0 ? splits
                            : matmul_split_k_for(matmul_device_rates(), (long long)grid.x * grid.y, BM, BN, BK, M, N, K);
    int chunk = K;
    if (slices > 1) {
        chunk = CEIL_DIV(CEIL_DIV(K, slices), BK) * BK;  // whole slices of BK
        slices = CEIL_DIV(K, chunk);
    }
    if (slices == 1) return with_epilogue(e, [&](auto ep) { return launch(ep, grid, out, chunk); });
    float* partial = matmul_workspace((size_t)slices * M * N);
    if (!partial) return -1;
    grid.z = slices;
    if (launch(std::integral_constant<Epilogue, Epilogue::None>{}, grid, partial, chunk)) return -1;
    const long long MN = (long long)M * N;
    const dim3 rgrid((unsigned)CEIL_DIV(MN, (long long)MATMUL_SPLITK_BLOCK_SIZE)), rblock(MATMUL_SPLITK_BLOCK_SIZE);
    return with_epilogue(e, [&](auto ep) {
        return engine_launch("matmul", "matmul_splitk_reduce_kernel", matmul_splitk_reduce_kernel<ep.value>, rgrid, rblock, 0,
                             stream, out, (const float*)partial, bias, residual, MN, N, slices);
    });
}
