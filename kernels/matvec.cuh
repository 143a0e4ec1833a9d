// matvec.cuh: the linear layers of a few rows, out[M, N] = inp[M, K] . weight[N, K]^T
// for M <= MATVEC_MAX_ROWS (decoding steps, short prefills), weights as matmul.cuh
// stores them. A tile of BM rows would be mostly empty there: these kernels give
// each output column a warp (or several) instead, read every weight once for all M
// rows, and fuse the bias/gelu/residual epilogue (a launch per step matters). Their
// own family, so a sweep of their launch sizes recompiles this unit, not the GEMM.
//
//   1. matvec_kernel: for M <= MATVEC_MAX_ROWS (decoding, short prefills with
//      --matmul own), one warp per output column, so all of N's columns run at
//      once instead of N/BN blocks; each weight row is read once for all M rows.
//      The bias/gelu/residual epilogue is fused: a launch per step matters there.
//   2. matvec_splitk_kernel: version 1 for decoding steps (gpt2_decode_step),
//      with several warps sharing one output column's K (split-K inside the
//      block). One warp per column left a decoding step's small layers with too
//      few loads in flight: the MLP projection (N=768, K=3072) ran 768 warps on
//      132 SMs at 0.7 TB/s. A block of MATVEC_DECODE_BLOCK_SIZE/32 warps takes
//      (warps / split) columns; the `split` warps of a column read interleaved
//      32-float4 strips of its K (so each warp's loads stay coalesced), keep the
//      first few float4s of their strip in registers before touching A, and add
//      their warp sums in shared memory in a fixed order, after which one thread
//      per output applies the epilogue. The launcher picks the split per shape
//      (matvec_split_for): the fewest warps per column that put half the warps
//      the GPU holds of this kernel (its own occupancy) to work, so the grid is
//      one wave, each lane keeping at least one float4 of K. At split 1 it sums
//      exactly as version 1.
//      With a RowNorm (LN=true), every block first normalizes the M input rows
//      into shared memory (rownorm.cuh, the LayerNorm kernel's own steps), so a
//      decoding step launches no LayerNorm before qkv, fc and the LM head; all
//      of a 768 K of W is already in flight while it does. With a KVWrite, the
//      qkv layer's stores also put k and v into the cache at the step's
//      position, so no kv_cache_write runs in a decoding step either; with its
//      `attention`, the block that completes a head's q, k and v runs the head's
//      attention (attention_row.cuh), so a short context launches no attention
//      kernel (matvec_decode_attends). At one row, a warp a column and a grid of
//      one wave, each warp LayerNorms the row itself (matvec_normalized_dot). Launched
//      as a programmatic dependent (common.cuh), it loads its first float4s of
//      W before it waits for the kernel ahead of it.
#pragma once
#include <algorithm>
#include <map>
#include <utility>

#include "attention_row.cuh"
#include "common.cuh"
#include "launchers.h"  // the launchers' declarations (and defaults)
#include "matvec_rules.cuh"
#include "rownorm.cuh"
#include "token_pick.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
// matvec: MATVEC_BLOCK_SIZE/32 output columns per block (a warp each), so the
// block size sets how many blocks a layer's N columns make (2304 columns of the
// QKV layer: 288 blocks at 256 threads) against the blocks an SM can hold;
// MATVEC_MAX_ROWS is the rows one launch takes (a register accumulator per row
// and lane; a forward pass with more rows takes the warp-tiled kernel, a
// decoding batch may not have more), not a launch size.
#ifndef MATVEC_BLOCK_SIZE
#define MATVEC_BLOCK_SIZE 256
#endif
#ifndef MATVEC_MAX_ROWS
#define MATVEC_MAX_ROWS 8
#endif
static_assert(MATVEC_BLOCK_SIZE % 32 == 0 && MATVEC_BLOCK_SIZE >= 32 && MATVEC_BLOCK_SIZE <= 1024,
              "MATVEC_BLOCK_SIZE must be a multiple of 32 (one warp per output column) up to 1024");
static_assert(MATVEC_MAX_ROWS >= 1 && MATVEC_MAX_ROWS <= 16, "MATVEC_MAX_ROWS must be 1..16");

// matvec_splitk_kernel (decoding steps): MATVEC_DECODE_BLOCK_SIZE/32 warps a
// block, which the launcher's split (a divisor of the warps) groups into
// columns; a larger block allows a deeper split (up to every warp on one column).
#ifndef MATVEC_DECODE_BLOCK_SIZE
#define MATVEC_DECODE_BLOCK_SIZE 256
#endif
static_assert(MATVEC_DECODE_BLOCK_SIZE % 32 == 0 && MATVEC_DECODE_BLOCK_SIZE >= 32 && MATVEC_DECODE_BLOCK_SIZE <= 1024,
              "MATVEC_DECODE_BLOCK_SIZE must be a multiple of 32 (whole warps share a column) up to 1024");

// ---- version 1: matvec (M <= MATVEC_MAX_ROWS) -----------------------------
template <int BLOCK, int ROWS, bool VEC, Epilogue E>
__global__ void __launch_bounds__(BLOCK) matvec_kernel(float* out, const float* __restrict__ A, const float* __restrict__ W,
                                                       const float* __restrict__ bias, const float* residual, int M, int N, int K) {
    const int n = blockIdx.x * (BLOCK / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (n >= N) return;  // whole warps leave together
    float acc[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc[r] = 0.0f;
    const float* wrow = W + (size_t)n * K;
    if constexpr (VEC) {
        const float4* w4 = reinterpret_cast<const float4*>(wrow);
#pragma unroll 4
        for (int k = lane; k < K / 4; k += 32) {
            const float4 wv = w4[k];
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                if (r < M) {
                    const float4 av = reinterpret_cast<const float4*>(A + (size_t)r * K)[k];
                    acc[r] += wv.x * av.x + wv.y * av.y + wv.z * av.z + wv.w * av.w;
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            const float wv = wrow[k];
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
                if (r < M) acc[r] += wv * A[(size_t)r * K + k];
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const float v = warp_sum<32>(acc[r]);
        if (lane == r && r < M) {
            const long long i = (long long)r * N + n;
            out[i] = epilogue_apply<E>(v, bias, n, residual, i);
        }
    }
}

// ---- version 2: split-K matvec for decoding steps ------------------------
// The M rows of A, LayerNorm-ed into `normed` (shared, M x K) with the LayerNorm
// kernel's steps and order (rownorm.cuh), so at equal block sizes the values are
// the ones layernorm_kernel writes; ends with a barrier, after which any thread
// may read any element.
template <int BLOCK, bool VEC>
__device__ __forceinline__ void matvec_normalize_rows(float* normed, const float* A, int M, int K, const RowNorm& ln,
                                                      float* scratch) {
    for (int r = 0; r < M; ++r) {
        float* row = normed + (size_t)r * K;
        const float sum = rownorm_stage<BLOCK, VEC>(row, A + (size_t)r * K, nullptr, nullptr, K);
        rownorm_finish<BLOCK, VEC>(row, nullptr, row, sum, ln.weight, ln.bias, K, ln.eps, scratch);
    }
    __syncthreads();
}

// acc += LayerNorm(x) . w over a row x of K <= 128 PRE floats, the lane's share: float4s
// k = lane + 32 i of x, of the LayerNorm's weight g and bias b (shared memory), and of w
// (wp[i], loaded already; those past `end` are not added). Mean and variance two-pass over
// the warp, as rownorm_finish computes them over a block (the sums' order differs).
template <int PRE>
__device__ __forceinline__ void matvec_normalized_dot(float& acc, const float4 (&wp)[PRE], const float* x, const float* g,
                                                      const float* b, int K, int lane, int end, float eps) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4 xv[PRE];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < PRE; ++i) {
        const int k = lane + 32 * i;
        xv[i] = k < K / 4 ? x4[k] : make_float4(0.f, 0.f, 0.f, 0.f);
        sum += (xv[i].x + xv[i].y) + (xv[i].z + xv[i].w);
    }
    const float mean = warp_sum<32>(sum) / K;
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < PRE; ++i) {
        if (lane + 32 * i < K / 4) {
            const float p = xv[i].x - mean, q = xv[i].y - mean, r = xv[i].z - mean, t = xv[i].w - mean;
            ss += (p * p + q * q) + (r * r + t * t);
        }
    }
    const float rstd = rsqrtf(warp_sum<32>(ss) / K + eps);
#pragma unroll
    for (int i = 0; i < PRE; ++i) {
        const int k = lane + 32 * i;
        if (k < end) {
            const float4 gv = reinterpret_cast<const float4*>(g)[k], bv = reinterpret_cast<const float4*>(b)[k], w = wp[i];
            acc += w.x * ((xv[i].x - mean) * rstd * gv.x + bv.x) + w.y * ((xv[i].y - mean) * rstd * gv.y + bv.y) +
                   w.z * ((xv[i].z - mean) * rstd * gv.z + bv.z) + w.w * ((xv[i].w - mean) * rstd * gv.w + bv.w);
        }
    }
}

// Resident blocks asked of the compiler: 1536 threads an SM at one row (at most
// 40 registers, 48 warps, no spills), 768 with the LayerNorm (at most 80: the six
// float4s of W a lane loads first stay live across it; at 1024 threads, 64
// registers, they spilled 20 bytes and decoding ran 3.5% slower on an H100 than
// here, where 8 bytes spill, 36 in the qkv build, which carries the KV-cache stores
// and the attention tail), 512 at eight rows (their accumulators and A loads take
// registers); left to itself ptxas chose 64-80 registers and spilled.
template <int BLOCK, int ROWS, bool LN>
constexpr int matvec_splitk_min_blocks() {
    constexpr int blocks = (ROWS > 1 ? 512 : LN ? 768 : 1536) / BLOCK;
    return blocks < 1 ? 1 : blocks > 32 ? 32 : blocks;  // an SM holds at most 32 blocks
}

// The qkv matvec's attention (KVWrite::attention): after its q, k and v stores,
// the block adds the columns it wrote to each head's count (columns first..first
// + cols of the 3C: q, k or v of one head, or of a few where a block spans
// several); the block whose columns complete a head's 3 x HS runs that head's
// attention for every row (attention_row), then zeroes the count for the next
// launch. The fence before the count publishes this block's stores to the block
// that will read them; that block reads them through L2.
template <int BLOCK>
__device__ void matvec_attention_tail(const KVWrite& kv, const float* qkv, int M, int N, int first, int cols, float* smem) {
    __shared__ int done[BLOCK / 32 + 2];  // heads this block completed: at most cols / HS + 2
    __shared__ int n_done;
    const int C = N / 3, HS = C / kv.heads;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        n_done = 0;
        const int end = min(first + cols, N);
        for (int c = first; c < end;) {
            const int next = min(end, (c / HS + 1) * HS), h = (c % C) / HS;
            const unsigned add = (unsigned)(next - c);
            if (atomicAdd(kv.counters + h, add) + add == 3u * HS) done[n_done++] = h;
            c = next;
        }
    }
    __syncthreads();
    const int keys = *kv.pos + 1;
    for (int i = 0; i < n_done; ++i) {
        const int h = done[i];
        for (int r = 0; r < M; ++r) {
            const size_t head = ((size_t)r * kv.heads + h) * kv.maxT * HS;
            attention_row<BLOCK>(kv.attention + (size_t)r * C + h * HS, qkv + (size_t)r * N + h * HS, kv.k + head, kv.v + head,
                                 keys, HS, smem);
        }
        if (threadIdx.x == 0) kv.counters[h] = 0;
    }
}

// Warp w of the block works on column blockIdx.x * (NW / split) + w / split and
// on strip w % split of its K: float4 (or float) indices strip*32 + lane, then
// every 32*split. Warps past N take no K but still reach the barriers.
template <int BLOCK, int ROWS, bool VEC, Epilogue E, bool LN>
__global__ void __launch_bounds__(BLOCK, matvec_splitk_min_blocks<BLOCK, ROWS, LN>())
    matvec_splitk_kernel(float* out, const float* __restrict__ A, const float* __restrict__ W, const float* __restrict__ bias,
                         const float* residual, int M, int N, int K, int split, bool warp_norm, RowNorm ln,
                         KVWrite kv, TokenPick pick) {
    constexpr int NW = BLOCK / 32;
    constexpr int PRE = matvec_preloads(LN);
    constexpr bool kQkv = matvec_writes_kv(E);     // the KV-cache stores and the attention tail
    constexpr bool kPick = matvec_picks_token(E);  // the LM head's token pick
    extern __shared__ __align__(16) float normed[];  // LN: the M normalized rows of A
    __shared__ float part[NW][ROWS];
    __shared__ float scratch[32];
    __shared__ unsigned long long block_best[kPick ? ROWS : 1];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (kPick && threadIdx.x < ROWS) block_best[threadIdx.x] = 0ull;  // before the barrier ahead of the epilogue
    const int cols = NW / split;
    const int n = blockIdx.x * cols + warp / split;
    const int first = (warp % split) * 32 + lane, stride = 32 * split;
    const float* wrow = W + (size_t)(n < N ? n : 0) * K;
    float acc[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc[r] = 0.0f;
    if constexpr (VEC) {
        const int end = n < N ? K / 4 : 0;
        const float4* w4 = reinterpret_cast<const float4*>(wrow);
        float4 wp[PRE];
#pragma unroll
        for (int i = 0; i < PRE; ++i) {
            const int k = first + i * stride;
            wp[i] = k < end ? w4[k] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        // One row whose float4s a lane needs are those of W it holds (k = lane + 32 i, all of
        // K): every warp LayerNorms the row itself, with warp sums, so no block barrier and
        // no staging stand between the wait and the products; the LayerNorm's weight and
        // bias go to shared memory first (registers hold W and the row).
        // (warp_norm: the launcher's choice, which matvec_warp_norm(M, K, split) allows.)
        const bool normalize_in_warps = LN && ROWS == 1 && warp_norm;
        if (normalize_in_warps) {
            for (int i = threadIdx.x; i < K / 4; i += BLOCK) {
                reinterpret_cast<float4*>(normed)[i] = reinterpret_cast<const float4*>(ln.weight)[i];
                reinterpret_cast<float4*>(normed + K)[i] = reinterpret_cast<const float4*>(ln.bias)[i];
            }
            __syncthreads();
        }
        // The weights are no kernel's output: loaded before the previous kernel ends
        // when launched as its dependent (common.cuh); A only after.
        grid_dependency_sync();
        if (normalize_in_warps) {
            matvec_normalized_dot<PRE>(acc[0], wp, A, normed, normed + K, K, lane, end, ln.eps);
        } else {
            if constexpr (LN) matvec_normalize_rows<BLOCK, true>(normed, A, M, K, ln, scratch);
            const float* a = LN ? normed : A;
            auto fma_row = [&](const float4& wv, int k) {
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    if (r < M) {
                        const float4 av = reinterpret_cast<const float4*>(a + (size_t)r * K)[k];
                        acc[r] += wv.x * av.x + wv.y * av.y + wv.z * av.z + wv.w * av.w;
                    }
                }
            };
#pragma unroll
            for (int i = 0; i < PRE; ++i)
                if (first + i * stride < end) fma_row(wp[i], first + i * stride);
#pragma unroll 4
            for (int k = first + PRE * stride; k < end; k += stride) fma_row(w4[k], k);
        }
    } else {
        const int end = n < N ? K : 0;
        grid_dependency_sync();
        if constexpr (LN) matvec_normalize_rows<BLOCK, false>(normed, A, M, K, ln, scratch);
        const float* a = LN ? normed : A;
        for (int k = first; k < end; k += stride) {
            const float wv = wrow[k];
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
                if (r < M) acc[r] += wv * a[(size_t)r * K + k];
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const float v = warp_sum<32>(acc[r]);
        if (lane == 0) part[warp][r] = v;
    }
    __syncthreads();
    // One thread per (row, column) of the block adds the column's strips in order.
    for (int t = threadIdx.x; t < cols * M; t += BLOCK) {
        const int c = t % cols, r = t / cols, nn = blockIdx.x * cols + c;
        if (nn >= N) continue;
        float v = part[c * split][r];
        for (int j = 1; j < split; ++j) v += part[c * split + j][r];
        const long long i = (long long)r * N + nn;
        v = epilogue_apply<E>(v, bias, nn, residual, i);
        out[i] = v;
        if (kPick && pick.best) atomicMax(block_best + r, token_key(v, nn));
        if (kQkv && kv.k && nn >= N / 3) {  // k or v, channel ch of C (head h): into the cache at the step's position
            const int C = N / 3, HS = C / kv.heads, ch = nn % C, h = ch / HS;
            float* cache = nn < 2 * C ? kv.k : kv.v;
            cache[(((size_t)r * kv.heads + h) * kv.maxT + *kv.pos) * HS + (ch - h * HS)] = v;
        }
    }
    if constexpr (kQkv && LN) {  // the qkv layer is LayerNorm-ed whenever its attention is folded in
        if (kv.attention) matvec_attention_tail<BLOCK>(kv, out, M, N, blockIdx.x * cols, cols, normed);
    }
    if constexpr (kPick) {
        if (pick.best) token_pick_fold(pick, block_best, M);
    }
}

// ---- launchers ------------------------------------------------------------
template <int BLOCK, int ROWS>
int matvec_forward_sized(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual,
                         int M, int N, int K, cudaStream_t stream) {
    if (M > ROWS) { fprintf(stderr, "matvec: M=%d rows, over MATVEC_MAX_ROWS=%d\n", M, ROWS); return -1; }
    const dim3 grid(CEIL_DIV(N, BLOCK / 32)), block(BLOCK);
    const bool vec = K % 4 == 0 && aligned16(A, W);
    return with_epilogue(e, [&](auto ep) {
        const auto kernel = vec ? matvec_kernel<BLOCK, ROWS, true, ep.value> : matvec_kernel<BLOCK, ROWS, false, ep.value>;
        return engine_launch("matmul", "matvec_kernel", kernel, grid, block, 0, stream, out, A, W, bias, residual, M, N, K);
    });
}

int matvec_forward(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual, int M,
                   int N, int K, cudaStream_t stream) {
    return matvec_forward_sized<MATVEC_BLOCK_SIZE, MATVEC_MAX_ROWS>(e, out, A, W, bias, residual, M, N, K, stream);
}

// This GPU's multiprocessors, read once.
inline int matvec_device_sms() {
    static const int sms = [] {
        int dev = 0, n = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
        cudaGetLastError();  // an attribute the device lacks leaves 0: the split stays small
        return n;
    }();
    return sms;
}

// Warps of `kernel` (blocks of `block` threads, `smem` bytes of dynamic shared
// memory) one multiprocessor holds at once, as the occupancy calculator says
// for its registers and shared memory; asked once per kernel and size.
template <typename Kernel>
int matvec_resident_warps(Kernel kernel, int block, size_t smem) {
    static std::map<std::pair<const void*, size_t>, int> known;
    const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), smem);
    if (const auto it = known.find(key); it != known.end()) return it->second;
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block, smem) != cudaSuccess) blocks = 1;
    cudaGetLastError();
    return known[key] = std::max(blocks, 1) * block / 32;
}

// `split` > 0 forces that many warps per column (kernel_check tries several); it must divide BLOCK/32.
template <int BLOCK, int ROWS>
int matvec_splitk_sized(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual,
                        int M, int N, int K, cudaStream_t stream, int split = 0, RowNorm ln = {}, KVWrite kv = {},
                        TokenPick pick = {}) {
    constexpr int NW = BLOCK / 32;
    if (!matvec_splitk_accepts(e, bias, M, ROWS, N, K, split, NW, ln, kv, pick)) return -1;
    const bool norm = ln.weight != nullptr;
    const int head_size = kv.heads > 0 ? N / 3 / kv.heads : 0;
    const bool vec = K % 4 == 0 && aligned16(A, W) && (!norm || aligned16(ln.weight, ln.bias));
    // A LayerNorm stages M rows, or its weight and bias where the warps normalize one row each.
    const size_t norm_rows = matvec_warp_norm(M, K, 1) ? 2 : (size_t)M;
    const size_t smem = std::max(norm ? norm_rows * K * sizeof(float) : 0,
                                 kv.attention ? sizeof(float) * attention_row_smem_floats(BLOCK, head_size) : 0);
    // One row (batch 1, what gpt2_generate decodes) has its own build: eight rows'
    // accumulators and A loads would cost registers, so fewer resident warps.
    auto launch = [&](auto ep, auto with_norm) {
        constexpr Epilogue E = decltype(ep)::value;
        constexpr bool LN = decltype(with_norm)::value;
        const auto kernel = M == 1 ? (vec ? matvec_splitk_kernel<BLOCK, 1, true, E, LN>
                                          : matvec_splitk_kernel<BLOCK, 1, false, E, LN>)
                                   : (vec ? matvec_splitk_kernel<BLOCK, ROWS, true, E, LN>
                                          : matvec_splitk_kernel<BLOCK, ROWS, false, E, LN>);
        const int resident = matvec_resident_warps(kernel, BLOCK, smem), sms = matvec_device_sms();
        const int s = split > 0 ? split : matvec_split_for(sms, resident, NW, N, K);
        const dim3 grid(CEIL_DIV(N, NW / s)), block(BLOCK);
        // Warps LayerNorm the row themselves (matvec_warp_norm) only where the grid is one
        // wave: every warp then reads the row from L2, as much as its column of W, which the
        // LM head's 6,283 blocks paid for (53.1 -> 57.7 us a step on an H100) and qkv and fc
        // do not.
        const bool warp_norm = norm && matvec_warp_norm(M, K, s) && (long long)grid.x * NW <= (long long)resident * sms;
        return engine_launch("matmul", "matvec_splitk_kernel", kernel, grid, block, smem, stream, out, A, W, bias, residual, M,
                             N, K, s, warp_norm, ln, kv, pick);
    };
    return with_epilogue(e, [&](auto ep) {
        return norm ? launch(ep, std::true_type{}) : launch(ep, std::false_type{});
    });
}

int matvec_decode_forward(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual,
                          int M, int N, int K, cudaStream_t stream, RowNorm ln, KVWrite kv, TokenPick pick) {
    return matvec_splitk_sized<MATVEC_DECODE_BLOCK_SIZE, MATVEC_MAX_ROWS>(e, out, A, W, bias, residual, M, N, K, stream, 0, ln,
                                                                         kv, pick);
}

int matmul_max_matvec_rows() { return MATVEC_MAX_ROWS; }
