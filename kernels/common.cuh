// common.cuh: what every kernel family shares.
//
// - conf.cuh, the sweep's launch sizes, is read here first (when the build passes
//   its folder with -I), so every family sees the same macros; a family defines
//   its own defaults for whatever conf.cuh leaves out.
// - cudaCheck: the one error check. It reports and returns an error code; the
//   programs decide whether to exit (helpers never exit).
// - block_sum / block_max: reductions for any legal block size (a power of two
//   up to 32, or a multiple of 32 up to 1024), so the sweep may try block sizes
//   smaller than a warp, as seed 004 did (4, 8, 16 threads).
// - Launch recording: every launcher launches through engine_launch, which
//   opens an NVTX range named after the kernel family (for nsys) and, when
//   per-launch timing is on, records CUDA events around the launch (the
//   `events` profile backend reads these, no profiler needed).
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include <cuda_runtime.h>
#include "types.h"
#include <nvtx3/nvToolsExt.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

// Legal sizes for a block that reduces with block_sum/block_max.
#define ENGINE_REDUCTION_BLOCK_OK(n) \
    ((n) >= 1 && (n) <= 1024 && ((n) <= 32 ? (((n) & ((n) - 1)) == 0) : ((n) % 32 == 0)))

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// Reports a failed CUDA call with where it happened; returns true on failure so
// callers can propagate: `if (cudaCheck(cudaMalloc(...))) return -1;`.
inline bool cudaCheckImpl(cudaError_t err, const char* what, const char* file, int line) {
    if (err == cudaSuccess) return false;
    fprintf(stderr, "CUDA error at %s:%d (%s): %s\n", file, line, what, cudaGetErrorString(err));
    return true;
}
#define cudaCheck(call) cudaCheckImpl((call), #call, __FILE__, __LINE__)

// ---------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------

template <int BLOCK>
__device__ __forceinline__ unsigned engine_warp_mask() {
    return BLOCK < 32 ? ((1u << BLOCK) - 1u) : 0xffffffffu;
}

struct SumOp {
    static constexpr float identity = 0.0f;
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
    static constexpr float identity = -INFINITY;
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduce across the first min(BLOCK, 32) lanes; every participating lane gets the result.
template <int BLOCK, class Op>
__device__ __forceinline__ float warp_reduce(float v) {
    constexpr int width = BLOCK < 32 ? BLOCK : 32;
#pragma unroll
    for (int off = width / 2; off > 0; off >>= 1) v = Op()(v, __shfl_xor_sync(engine_warp_mask<BLOCK>(), v, off));
    return v;
}

// Block-wide reduction over a 1-D block of BLOCK threads. `scratch` holds >= 32 floats
// of shared memory; the leading barrier lets callers reuse it for consecutive reductions.
template <int BLOCK, class Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
    static_assert(ENGINE_REDUCTION_BLOCK_OK(BLOCK), "reduction block: power of two <= 32 or multiple of 32 <= 1024");
    v = warp_reduce<BLOCK, Op>(v);
    if constexpr (BLOCK > 32) {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        __syncthreads();
        if (lane == 0) scratch[warp] = v;
        __syncthreads();
        v = lane < BLOCK / 32 ? scratch[lane] : Op::identity;
        v = warp_reduce<32, Op>(v);
    }
    return v;
}

template <int BLOCK> __device__ __forceinline__ float warp_sum(float v) { return warp_reduce<BLOCK, SumOp>(v); }
template <int BLOCK> __device__ __forceinline__ float warp_max(float v) { return warp_reduce<BLOCK, MaxOp>(v); }
template <int BLOCK> __device__ __forceinline__ float block_sum(float v, float* s) { return block_reduce<BLOCK, SumOp>(v, s); }
template <int BLOCK> __device__ __forceinline__ float block_max(float v, float* s) { return block_reduce<BLOCK, MaxOp>(v, s); }

// tanh-approximated GELU, as transformers' "gelu_new" (GPT-2's activation).
__device__ __forceinline__ float gelu_tanh(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// Applies a matmul epilogue to one output element (col = its output column).
// Shared by prepare-out and matvec.
template <Epilogue E>
__device__ __forceinline__ float epilogue_apply(float v, const float* bias, int col, const float* residual, long long i) {
    if constexpr (E == Epilogue::None) return v;
    if (bias) v += bias[col];
    if constexpr (E == Epilogue::BiasGelu) v = gelu_tanh(v);
    if constexpr (E == Epilogue::BiasResidual) v += residual[i];
    return v;
}

// Calls f(std::integral_constant<Epilogue, E>{}) for the run-time epilogue e, so a
// launcher instantiates its kernel once per epilogue and picks one at run time.
template <class F>
int with_epilogue(Epilogue e, F&& f) {
    switch (e) {
        case Epilogue::None: return f(std::integral_constant<Epilogue, Epilogue::None>{});
        case Epilogue::Bias: return f(std::integral_constant<Epilogue, Epilogue::Bias>{});
        case Epilogue::BiasGelu: return f(std::integral_constant<Epilogue, Epilogue::BiasGelu>{});
        case Epilogue::BiasResidual: return f(std::integral_constant<Epilogue, Epilogue::BiasResidual>{});
    }
    return -1;
}

// True when every pointer is 16-byte aligned, so float4 accesses are legal.
__host__ __device__ inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
template <typename... P>
__host__ __device__ inline bool aligned16(const void* p, P... rest) { return aligned16(p) && aligned16(rest...); }

// Grid for an elementwise kernel that does one float4 (vec) or one float per thread.
inline dim3 elementwise_grid(long long n, int block, bool vec) {
    const long long threads = vec ? n / 4 + 1 : n;
    return dim3((unsigned)CEIL_DIV(threads, (long long)block));
}

// ---------------------------------------------------------------------------
// Asynchronous copies to shared memory (cp.async, sm_80 and later): the own
// matmuls' pipelines (matmul_simt.cuh, matmul_tf32x3.cuh)
// ---------------------------------------------------------------------------
__device__ __forceinline__ void cp_async_f32(float* smem_dst, const float* src) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
// A zero-byte copy (valid false) reads nothing and zero-fills, so src may lie past the matrix.
__device__ __forceinline__ void cp_async_f32(float* smem_dst, const float* src, bool valid) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
// 16 bytes through L2 only (.cg); zero-filled, reading nothing, when valid is false.
__device__ __forceinline__ void cp_async_16(float* smem_dst, const float* src, bool valid) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING)); }

// ---------------------------------------------------------------------------
// Programmatic dependent launches (sm_90 and later)
// ---------------------------------------------------------------------------
// Inside a DependentLaunches scope (the decoding step), engine_launch lets a kernel
// start before the previous kernel on its stream has finished: its blocks take
// the SM slots that kernel leaves free and load what no kernel writes (weights)
// while it drains. At batch 1 a layer's kernels are a few microseconds each, most
// of it launch and first-load latency, which this hides.
//
// The rule for every kernel such a scope may launch: grid_dependency_wait() in
// every thread (early-leaving ones included, so no kernel ends before the one it
// follows and the chain stays in order) before it reads anything an earlier
// kernel wrote or writes anything (an earlier kernel may still be reading it).
// grid_dependents_launch() lets the next kernel's blocks in once every block of
// this one has called it; grid_dependency_sync() calls it before the wait, so a
// layer's next matvecs are launched, and load their weights, while this one
// still waits (a chain of kernels, each waiting for the one before it, as deep
// as the SMs' free slots allow). That cannot starve a kernel of its own slots:
// its dependents come in only after all its blocks have started. Calling it
// after the wait instead (at most one kernel waiting ahead) decoded 7% slower on
// an H100 (GPT-2 124M after an 8-token prompt: 2,912 against 3,121 tokens/s).
// Both are no-ops before sm_90 and in a kernel launched the ordinary way.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Both: the next kernel in, then the wait for the one before.
__device__ __forceinline__ void grid_dependency_sync() {
    grid_dependents_launch();
    grid_dependency_wait();
}

// While one is alive (on this thread), engine_launch launches kernels as
// programmatic dependents of the previous kernel on their stream, where the
// GPU can (compute capability 9.0+) and per-launch events are off (an event
// between two launches orders them fully, and its times would include the
// overlap). Scopes nest; the outer one's setting comes back at the end.
class DependentLaunches {
public:
    explicit DependentLaunches(bool on) : previous_(active()) { active() = on && supported(); }
    ~DependentLaunches() { active() = previous_; }
    DependentLaunches(const DependentLaunches&) = delete;
    DependentLaunches& operator=(const DependentLaunches&) = delete;
    static bool& active() {
        static thread_local bool on = false;
        return on;
    }
    // Whether this process's GPU launches programmatic dependents (compute capability 9.0+).
    static bool supported() {
        static const bool yes = [] {
            int dev = 0, major = 0;
            cudaGetDevice(&dev);
            const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess;
            cudaGetLastError();
            return ok && major >= 9;
        }();
        return yes;
    }

private:
    bool previous_;
};

// ---------------------------------------------------------------------------
// Launch recording (NVTX ranges + optional per-launch CUDA events)
// ---------------------------------------------------------------------------

struct LaunchRecord {
    const char* kernel;  // function name as profilers show it
    dim3 grid, block;
    cudaEvent_t start, stop;
};

// Collects per-launch events while enabled. Event pairs are pooled and reused
// between iterations so recording does not allocate on the timed path.
class LaunchRecorder {
public:
    static LaunchRecorder& get() { static LaunchRecorder r; return r; }
    bool enabled = false;
    std::vector<LaunchRecord> records;

    void begin(const char* kernel, dim3 grid, dim3 block, cudaStream_t stream) {
        if (!enabled) return;
        if (used_ == pool_.size()) {
            LaunchRecord r{};
            cudaCheck(cudaEventCreate(&r.start));
            cudaCheck(cudaEventCreate(&r.stop));
            pool_.push_back(r);
        }
        LaunchRecord& r = pool_[used_];
        r.kernel = kernel; r.grid = grid; r.block = block;
        cudaCheck(cudaEventRecord(r.start, stream));
    }
    void end(cudaStream_t stream) {
        if (!enabled) return;
        cudaCheck(cudaEventRecord(pool_[used_].stop, stream));
        records.push_back(pool_[used_]);
        ++used_;
    }
    // Forget recorded launches (events stay pooled).
    void reset() { records.clear(); used_ = 0; }

private:
    std::vector<LaunchRecord> pool_;
    size_t used_ = 0;
};

// Checks the launch right away (bad sizes surface here, named), and records it.
inline bool engine_launch_check(const char* kernel, dim3 grid, dim3 block) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return false;
    fprintf(stderr, "launch of %s grid=(%u,%u,%u) block=(%u,%u,%u) failed: %s\n", kernel, grid.x, grid.y, grid.z,
            block.x, block.y, block.z, cudaGetErrorString(err));
    return true;
}

// Launches `kernel` inside an NVTX range named after its family, records it when
// per-launch timing is on, and checks the launch at once. Returns 0, or -1 after
// printing which launch failed and why.
template <typename... KernelArgs, typename... Args>
int engine_launch(const char* family, const char* name, void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                  size_t smem, cudaStream_t stream, Args... args) {
    nvtxRangePushA(family);
    LaunchRecorder::get().begin(name, grid, block, stream);
    if (DependentLaunches::active() && !LaunchRecorder::get().enabled) {
        cudaLaunchAttribute attribute{};
        attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attribute.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t config{};
        config.gridDim = grid;
        config.blockDim = block;
        config.dynamicSmemBytes = smem;
        config.stream = stream;
        config.attrs = &attribute;
        config.numAttrs = 1;
        cudaLaunchKernelEx(&config, kernel, static_cast<KernelArgs>(args)...);
    } else {
        kernel<<<grid, block, smem, stream>>>(args...);
    }
    LaunchRecorder::get().end(stream);
    nvtxRangePop();
    return engine_launch_check(name, grid, block) ? -1 : 0;
}
