// attention.cuh: causal multi-head self-attention. qkv is (B, T, 3C) with q, k, v
// side by side and head h at columns h*HS..; the output is (B, T, C).
//
// Versions:
//   1. Reference (plain), three passes through device memory, each thread one
//      output element; with softmax.cuh in between:
//        attention_qk_kernel  preatt[b,h,t1,t2] = q.k / sqrt(HS)   (t2 <= t1)
//        softmax_kernel       (softmax.cuh)
//        attention_av_kernel  out[b,t1,h,:] = sum_t2 att[b,h,t1,t2] v[b,t2,h,:]
//      Simple enough to trust; O(B*NH*T^2) memory. The model falls back to it
//      for head sizes the flash kernel is not built for (16, 32, 48, 64, 96, 128).
//   2. attention_flash_kernel: flash-attention style (seeds 000, 002, 004). A
//      block owns BR query rows of one (b, h) and walks the key/value rows in
//      tiles of BC up to the causal diagonal, keeping the running max, sum and
//      output in registers (online softmax), so the T x T scores never reach
//      device memory. Each thread computes a TM x TN patch of the score tile
//      and TM x HS/(BC/TN) outputs; tiles are staged in shared memory with
//      rows padded by 4 floats so 16-byte reads across a quarter warp hit
//      distinct banks (seed 000, v2: bank conflicts cost most). Query tiles
//      are issued last-first, so the longest (bottom) rows start first.
//   3. attention_decode_kernel: one query row per (b, h) against the KV cache
//      (kvcache.cuh), reading the position from device memory so a captured
//      CUDA graph can replay every decoding step. A block per (h, b), the grid
//      NH x B, walks every key with attention_row (attention_row.cuh: each warp
//      loads the k and v rows of several keys before it sums a score, keeps an
//      online softmax, and the warps are combined in shared memory). The same
//      helper runs in the decoding qkv matvec's tail (matvec.cuh), which is how
//      a decoding step with a short context attends; kernel_check checks it here.
//   4. attention_decode_split_kernel (flash-decoding; what gpt2_decode_step
//      launches for a long context): version 3 has NH x B blocks for a whole
//      GPU, each walking every key in turn. Here positions 0..pos are cut into chunks of
//      ATTENTION_DECODE_CHUNK keys, a block per (h, b, chunk); the grid is sized
//      for maxT and blocks past pos leave at once (pos lives on the device, so a
//      replayed CUDA graph sees each step's). In a block each warp takes keys
//      w, w + NW, ... of the chunk: the lanes split the head's dimensions, so a
//      warp issues all its keys' loads before one warp sum per key, then the
//      weighted values the same way; a warp's max, sum and partial output are
//      combined over the block in shared memory (online-softmax rescaling), and
//      written, unnormalized, with the block's max and sum, to a scratch slot of
//      the chunk. The last block of a head to finish (an atomic count, reset by
//      that block for the next step) rescales and adds the chunks' outputs in
//      chunk order. A context of one chunk writes its output directly.
#pragma once
#include "attention_row.cuh"
#include "common.cuh"

// ---- launch sizes (conf.cuh) ----------------------------------------------
#ifndef ATTENTION_BR
#define ATTENTION_BR 64
#endif
#ifndef ATTENTION_BC
#define ATTENTION_BC 64
#endif
#ifndef ATTENTION_TM
#define ATTENTION_TM 4
#endif
#ifndef ATTENTION_TN
#define ATTENTION_TN 4
#endif
static_assert(ATTENTION_BR % ATTENTION_TM == 0 && ATTENTION_BC % ATTENTION_TN == 0,
              "ATTENTION_BR must be a multiple of ATTENTION_TM and ATTENTION_BC a multiple of ATTENTION_TN");
static_assert(32 % (ATTENTION_BC / ATTENTION_TN) == 0,
              "ATTENTION_BC / ATTENTION_TN (threads sharing a query row) must divide 32 so a row's reductions stay in one warp");
static_assert((ATTENTION_BR / ATTENTION_TM) * (ATTENTION_BC / ATTENTION_TN) % 32 == 0 &&
                  (ATTENTION_BR / ATTENTION_TM) * (ATTENTION_BC / ATTENTION_TN) <= 1024,
              "ATTENTION threads per block, (BR/TM)*(BC/TN), must be a multiple of 32 up to 1024");
// Shared memory for GPT-2's head size 64 must fit the largest opt-in of the
// supported GPUs (227 KB on sm_90); the launcher checks the device's own limit.
static_assert(4 * (ATTENTION_BR * 68 + 2 * ATTENTION_BC * 68 + ATTENTION_BR * (ATTENTION_BC + 4)) <= 227 * 1024,
              "ATTENTION_BR/BC tiles need more shared memory than any GPU has (227 KB) at head size 64");

#ifndef ATTENTION_REF_BLOCK_SIZE
#define ATTENTION_REF_BLOCK_SIZE 256
#endif
static_assert(ATTENTION_REF_BLOCK_SIZE >= 1 && ATTENTION_REF_BLOCK_SIZE <= 1024,
              "ATTENTION_REF_BLOCK_SIZE must be between 1 and 1024 threads per block");

#ifndef ATTENTION_DECODE_BLOCK_SIZE
#define ATTENTION_DECODE_BLOCK_SIZE 256
#endif
static_assert(ATTENTION_DECODE_BLOCK_SIZE % 32 == 0 && ATTENTION_DECODE_BLOCK_SIZE >= 32 && ATTENTION_DECODE_BLOCK_SIZE <= 1024,
              "ATTENTION_DECODE_BLOCK_SIZE must be a multiple of 32 (a warp per key) from 32 to 1024");

// Keys per block of the split decoding kernel; each warp keeps CHUNK / (BLOCK/32)
// scores in registers, so a block of few warps takes short chunks.
#ifndef ATTENTION_DECODE_CHUNK
#define ATTENTION_DECODE_CHUNK 32
#endif
static_assert(ATTENTION_DECODE_CHUNK >= 1 && ATTENTION_DECODE_CHUNK <= 1024,
              "ATTENTION_DECODE_CHUNK (keys a decoding block takes) must be 1..1024");
static_assert(ATTENTION_DECODE_BLOCK_SIZE < 32 ||
                  (ATTENTION_DECODE_CHUNK + ATTENTION_DECODE_BLOCK_SIZE / 32 - 1) / (ATTENTION_DECODE_BLOCK_SIZE / 32) <= 32,
              "ATTENTION_DECODE_CHUNK / (ATTENTION_DECODE_BLOCK_SIZE/32), the keys each warp scores in registers, must be at most 32");

// ---- version 1: reference -------------------------------------------------
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) attention_qk_kernel(float* __restrict__ preatt, const float* __restrict__ qkv, int B,
                                                             int T, int NH, int HS) {
    const long long idx = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (idx >= (long long)B * NH * T * T) return;
    const int t2 = (int)(idx % T), t1 = (int)((idx / T) % T), h = (int)((idx / T / T) % NH), b = (int)(idx / T / T / NH);
    if (t2 > t1) { preatt[idx] = -INFINITY; return; }
    const int C = NH * HS;
    const float* q = qkv + ((size_t)b * T + t1) * 3 * C + h * HS;
    const float* k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * HS;
    float s = 0.0f;
    for (int d = 0; d < HS; ++d) s += q[d] * k[d];
    preatt[idx] = s * (1.0f / sqrtf((float)HS));
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) attention_av_kernel(float* __restrict__ out, const float* __restrict__ att,
                                                             const float* __restrict__ qkv, int B, int T, int NH, int HS) {
    const long long idx = (long long)blockIdx.x * BLOCK + threadIdx.x;
    const int C = NH * HS;
    if (idx >= (long long)B * T * C) return;
    const int d = (int)(idx % HS), h = (int)((idx / HS) % NH), t1 = (int)((idx / C) % T), b = (int)(idx / C / T);
    const float* a = att + (((size_t)b * NH + h) * T + t1) * T;
    const float* v = qkv + (size_t)b * T * 3 * C + 2 * C + h * HS + d;
    float s = 0.0f;
    for (int t2 = 0; t2 <= t1; ++t2) s += a[t2] * v[(size_t)t2 * 3 * C];
    out[((size_t)b * T + t1) * C + h * HS + d] = s;
}

// ---- version 2: flash -----------------------------------------------------
template <int HS, int BR, int BC>
constexpr size_t attention_flash_smem_bytes() {
    return sizeof(float) * ((size_t)BR * (HS + 4) + 2 * (size_t)BC * (HS + 4) + (size_t)BR * (BC + 4));
}

template <int HS, int BR, int BC, int TM, int TN>
__global__ void __launch_bounds__((BR / TM) * (BC / TN)) attention_flash_kernel(float* __restrict__ out, const float* __restrict__ qkv,
                                                                                int T, int NH) {
    constexpr int TX = BC / TN;       // threads sharing one query row
    constexpr int NT = (BR / TM) * TX;
    constexpr int OD = HS / TX;       // output columns per thread
    constexpr int QS = HS + 4, PS = BC + 4;
    static_assert(HS % 4 == 0 && HS % TX == 0, "head size must be a multiple of 4 and of BC/TN (columns per thread)");
    extern __shared__ __align__(16) float smem[];
    float* Qs = smem;             // [BR][QS], pre-scaled by 1/sqrt(HS)
    float* Ks = Qs + BR * QS;     // [BC][QS]
    float* Vs = Ks + BC * QS;     // [BC][QS]
    float* Ps = Vs + BC * QS;     // [BR][PS]

    const int C = NH * HS, C3 = 3 * C;
    const int h = blockIdx.y, b = blockIdx.z;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * BR;
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    const float* base = qkv + (size_t)b * T * C3 + h * HS;
    const float scale = 1.0f / sqrtf((float)HS);

    for (int e = threadIdx.x; e < BR * HS / 4; e += NT) {
        const int r = e / (HS / 4), d = (e % (HS / 4)) * 4;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (q0 + r < T) v = *reinterpret_cast<const float4*>(base + (size_t)(q0 + r) * C3 + d);
        *reinterpret_cast<float4*>(Qs + r * QS + d) = make_float4(v.x * scale, v.y * scale, v.z * scale, v.w * scale);
    }

    float m[TM], l[TM], o[TM][OD];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < OD; ++c) o[i][c] = 0.0f;
    }

    const int kv_end = min(T, q0 + BR);
    for (int k0 = 0; k0 < kv_end; k0 += BC) {
        __syncthreads();  // previous tile fully consumed (and Qs staged, first time)
        for (int e = threadIdx.x; e < BC * HS / 4; e += NT) {
            const int c = e / (HS / 4), d = (e % (HS / 4)) * 4;
            float4 kv = make_float4(0.f, 0.f, 0.f, 0.f), vv = kv;
            if (k0 + c < T) {
                kv = *reinterpret_cast<const float4*>(base + (size_t)(k0 + c) * C3 + C + d);
                vv = *reinterpret_cast<const float4*>(base + (size_t)(k0 + c) * C3 + 2 * C + d);
            }
            *reinterpret_cast<float4*>(Ks + c * QS + d) = kv;
            *reinterpret_cast<float4*>(Vs + c * QS + d) = vv;
        }
        __syncthreads();

        // Scores for rows ty*TM+i and keys tx + j*TX.
        float s[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) s[i][j] = 0.0f;
#pragma unroll 4
        for (int d = 0; d < HS; d += 4) {
            float4 qv[TM], kv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) qv[i] = *reinterpret_cast<const float4*>(Qs + (ty * TM + i) * QS + d);
#pragma unroll
            for (int j = 0; j < TN; ++j) kv[j] = *reinterpret_cast<const float4*>(Ks + (tx + j * TX) * QS + d);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    s[i][j] += qv[i].x * kv[j].x + qv[i].y * kv[j].y + qv[i].z * kv[j].z + qv[i].w * kv[j].w;
        }

        // Online softmax over this tile, row by row.
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int qr = q0 + ty * TM + i;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int kc = k0 + tx + j * TX;
                if (kc > qr || kc >= T) s[i][j] = -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
#pragma unroll
            for (int off = TX / 2; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float m_new = fmaxf(m[i], mx);  // finite: key 0 is in the first tile of every row
            const float alpha = expf(m[i] - m_new);
            float rs = 0.0f;
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const float p = expf(s[i][j] - m_new);
                rs += p;
                Ps[(ty * TM + i) * PS + tx + j * TX] = p;
            }
#pragma unroll
            for (int off = TX / 2; off > 0; off >>= 1) rs += __shfl_xor_sync(0xffffffffu, rs, off);
            l[i] = l[i] * alpha + rs;
            m[i] = m_new;
#pragma unroll
            for (int c = 0; c < OD; ++c) o[i][c] *= alpha;
        }
        __syncthreads();

        // o += P . V for rows ty*TM+i, columns tx*OD..
#pragma unroll 2
        for (int c = 0; c < BC; c += 4) {
            float4 pv[TM];
#pragma unroll
            for (int i = 0; i < TM; ++i) pv[i] = *reinterpret_cast<const float4*>(Ps + (ty * TM + i) * PS + c);
#pragma unroll
            for (int cc = 0; cc < 4; ++cc) {
                const float* vrow = Vs + (c + cc) * QS + tx * OD;
                float p[TM];
#pragma unroll
                for (int i = 0; i < TM; ++i) p[i] = cc == 0 ? pv[i].x : cc == 1 ? pv[i].y : cc == 2 ? pv[i].z : pv[i].w;
                if constexpr (OD % 4 == 0) {
#pragma unroll
                    for (int d = 0; d < OD; d += 4) {
                        const float4 v = *reinterpret_cast<const float4*>(vrow + d);
#pragma unroll
                        for (int i = 0; i < TM; ++i) {
                            o[i][d] += p[i] * v.x;
                            o[i][d + 1] += p[i] * v.y;
                            o[i][d + 2] += p[i] * v.z;
                            o[i][d + 3] += p[i] * v.w;
                        }
                    }
                } else {
#pragma unroll
                    for (int d = 0; d < OD; ++d) {
                        const float v = vrow[d];
#pragma unroll
                        for (int i = 0; i < TM; ++i) o[i][d] += p[i] * v;
                    }
                }
            }
        }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int qr = q0 + ty * TM + i;
        if (qr >= T) continue;
        const float inv = 1.0f / l[i];
        float* dst = out + ((size_t)b * T + qr) * C + h * HS + tx * OD;
        if constexpr (OD % 4 == 0) {
#pragma unroll
            for (int d = 0; d < OD; d += 4)
                *reinterpret_cast<float4*>(dst + d) = make_float4(o[i][d] * inv, o[i][d + 1] * inv, o[i][d + 2] * inv, o[i][d + 3] * inv);
        } else {
#pragma unroll
            for (int d = 0; d < OD; ++d) dst[d] = o[i][d] * inv;
        }
    }
}

// ---- version 3: decode ----------------------------------------------------
// kcache/vcache: this layer's (B, NH, maxT, HS) caches; keys 0..*pos are valid.
// The block's work is attention_row's (attention_row.cuh), which the decoding qkv
// matvec also runs in its tail.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) attention_decode_kernel(float* __restrict__ out, const float* __restrict__ qkv,
                                                                 const float* __restrict__ kcache, const float* __restrict__ vcache,
                                                                 const int* __restrict__ pos, int NH, int HS, int maxT) {
    extern __shared__ float sm[];  // attention_row_smem_floats(BLOCK, HS)
    grid_dependency_sync();
    const int h = blockIdx.x, b = blockIdx.y, C = NH * HS;
    const size_t head = ((size_t)b * NH + h) * maxT * HS;
    attention_row<BLOCK>(out + (size_t)b * C + h * HS, qkv + (size_t)b * 3 * C + h * HS, kcache + head, vcache + head, *pos + 1,
                         HS, sm);
}

// ---- version 4: split decode (flash-decoding) ------------------------------
// Scratch for a (b, h) pair's chunks: HS floats of output per chunk, then a max
// and a sum per chunk; `splits_max` = ceil(maxT / CHUNK) slots each.
struct AttentionDecodeScratch {
    float* o;  // [B*NH][splits_max][HS]
    float* ml; // [B*NH][splits_max][2]
    int splits_max;
    __host__ __device__ static AttentionDecodeScratch at(float* base, int B, int NH, int HS, int splits_max) {
        return {base, base + (size_t)B * NH * splits_max * HS, splits_max};
    }
};

template <int BLOCK, int CHUNK>
__global__ void __launch_bounds__(BLOCK) attention_decode_split_kernel(float* __restrict__ out, const float* __restrict__ qkv,
                                                                       const float* __restrict__ kcache,
                                                                       const float* __restrict__ vcache,
                                                                       const int* __restrict__ pos, AttentionDecodeScratch scratch,
                                                                       unsigned int* __restrict__ counters, int NH, int HS,
                                                                       int maxT) {
    constexpr int NW = BLOCK / 32, KPW = (CHUNK + NW - 1) / NW;
    extern __shared__ float sm[];
    float* wo = sm;                        // [NW][HS] each warp's unnormalized output
    float* wm = wo + NW * HS;              // [NW] each warp's max
    float* wl = wm + NW;                   // [NW] each warp's sum
    float* zm = wl + NW;                   // [splits_max] the last block: every chunk's max,
    float* zl = zm + scratch.splits_max;   //   sum
    float* zw = zl + scratch.splits_max;   //   and weight
    __shared__ bool is_last;
    grid_dependency_sync();  // launched as a dependent in the decoding step (common.cuh): pos, q, the cache after this
    const int h = blockIdx.x, b = blockIdx.y, z = blockIdx.z;
    const int last = *pos, splits = last / CHUNK + 1;
    if (z >= splits) return;  // past the position: the whole block leaves
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int C = NH * HS, bh = b * NH + h;
    const int t0 = z * CHUNK, t_end = min(t0 + CHUNK, last + 1);
    const float* q = qkv + (size_t)b * 3 * C + h * HS;
    const float* K = kcache + (size_t)bh * maxT * HS;
    const float* V = vcache + (size_t)bh * maxT * HS;
    const float scale = 1.0f / sqrtf((float)HS);

    // Scores of this warp's keys t0 + warp + i*NW: every key's loads before any sum.
    float s[KPW];
#pragma unroll
    for (int i = 0; i < KPW; ++i) s[i] = 0.0f;
    for (int d = lane; d < HS; d += 32) {
        const float qd = q[d];
#pragma unroll
        for (int i = 0; i < KPW; ++i) {
            const int t = t0 + warp + i * NW;
            if (t < t_end) s[i] += qd * K[(size_t)t * HS + d];
        }
    }
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < KPW; ++i) {
        s[i] = warp_sum<32>(s[i]) * scale;  // every lane holds the sum
        if (t0 + warp + i * NW < t_end) m = fmaxf(m, s[i]);
    }
    float l = 0.0f;
#pragma unroll
    for (int i = 0; i < KPW; ++i) {
        s[i] = t0 + warp + i * NW < t_end ? expf(s[i] - m) : 0.0f;  // a warp without keys: all 0, m = -inf
        l += s[i];
    }
    for (int d = lane; d < HS; d += 32) {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < KPW; ++i) {
            const int t = t0 + warp + i * NW;
            if (t < t_end) acc += s[i] * V[(size_t)t * HS + d];
        }
        wo[warp * HS + d] = acc;
    }
    if (lane == 0) { wm[warp] = m; wl[warp] = l; }
    __syncthreads();

    // The block's chunk: warps rescaled to the block's max (finite: warp 0 holds key t0).
    float bm = -INFINITY;
    for (int w = 0; w < NW; ++w) bm = fmaxf(bm, wm[w]);
    float bl = 0.0f;
    for (int w = 0; w < NW; ++w) bl += wl[w] * expf(wm[w] - bm);
    float* o_z = scratch.o + ((size_t)bh * scratch.splits_max + z) * HS;
    for (int d = threadIdx.x; d < HS; d += BLOCK) {
        float o = 0.0f;
        for (int w = 0; w < NW; ++w) o += wo[w * HS + d] * expf(wm[w] - bm);
        if (splits == 1) out[(size_t)b * C + h * HS + d] = o / bl;
        else o_z[d] = o;
    }
    if (splits == 1) return;
    if (threadIdx.x == 0) {
        scratch.ml[((size_t)bh * scratch.splits_max + z) * 2] = bm;
        scratch.ml[((size_t)bh * scratch.splits_max + z) * 2 + 1] = bl;
    }
    // Publish this chunk, then count it; the block that counts the last chunk combines.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[bh], 1u) == (unsigned int)splits - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const float* ml = scratch.ml + (size_t)bh * scratch.splits_max * 2;
    for (int j = threadIdx.x; j < splits; j += BLOCK) {
        zm[j] = __ldcg(ml + 2 * j);
        zl[j] = __ldcg(ml + 2 * j + 1);
    }
    __syncthreads();
    float gm = -INFINITY;
    for (int j = 0; j < splits; ++j) gm = fmaxf(gm, zm[j]);
    for (int j = threadIdx.x; j < splits; j += BLOCK) zw[j] = expf(zm[j] - gm);
    __syncthreads();
    float gl = 0.0f;
    for (int j = 0; j < splits; ++j) gl += zl[j] * zw[j];
    const float* o_all = scratch.o + (size_t)bh * scratch.splits_max * HS;
    for (int d = threadIdx.x; d < HS; d += BLOCK) {
        float o = 0.0f;
        for (int j = 0; j < splits; ++j) o += __ldcg(o_all + (size_t)j * HS + d) * zw[j];
        out[(size_t)b * C + h * HS + d] = o / gl;
    }
    if (threadIdx.x == 0) counters[bh] = 0;  // ready for the next step (a graph replay)
}

// ---- launchers ------------------------------------------------------------
int attention_qk_forward(float* preatt, const float* qkv, int B, int T, int NH, int HS, cudaStream_t stream) {
    constexpr int BLOCK = ATTENTION_REF_BLOCK_SIZE;
    const dim3 grid((unsigned)CEIL_DIV((long long)B * NH * T * T, (long long)BLOCK));
    return engine_launch("attention", "attention_qk_kernel", attention_qk_kernel<BLOCK>, grid, dim3(BLOCK), 0, stream, preatt, qkv, B, T, NH, HS);
}

int attention_av_forward(float* out, const float* att, const float* qkv, int B, int T, int NH, int HS, cudaStream_t stream) {
    constexpr int BLOCK = ATTENTION_REF_BLOCK_SIZE;
    const dim3 grid((unsigned)CEIL_DIV((long long)B * T * NH * HS, (long long)BLOCK));
    return engine_launch("attention", "attention_av_kernel", attention_av_kernel<BLOCK>, grid, dim3(BLOCK), 0, stream, out, att, qkv, B, T, NH, HS);
}

template <int HS, int BR, int BC, int TM, int TN>
int attention_flash_launch(float* out, const float* qkv, int B, int T, int NH, cudaStream_t stream) {
    constexpr size_t smem = attention_flash_smem_bytes<HS, BR, BC>();
    auto kernel = attention_flash_kernel<HS, BR, BC, TM, TN>;
    static bool configured = false;  // the opt-in is per kernel, once per process
    if (!configured) {
        int dev = 0, optin = 0;
        if (cudaCheck(cudaGetDevice(&dev)) ||
            cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)))
            return -1;
        if (smem > (size_t)optin) {
            fprintf(stderr, "attention_flash: BR=%d BC=%d at head size %d need %zu bytes of shared memory; this GPU allows %d\n",
                    BR, BC, HS, smem, optin);
            return -1;
        }
        if (cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem))) return -1;
        configured = true;
    }
    const dim3 grid(CEIL_DIV(T, BR), NH, B), block((BR / TM) * (BC / TN));
    return engine_launch("attention", "attention_flash_kernel", kernel, grid, block, smem, stream, out, qkv, T, NH);
}

// Head sizes the flash kernel is built for (GPT-2's is 64); others use the reference.
template <int HS>
constexpr bool attention_flash_builds() {
    constexpr int TX = ATTENTION_BC / ATTENTION_TN;
    return HS % 4 == 0 && HS % TX == 0;
}

bool attention_flash_supports(int HS) {
    switch (HS) {
        case 16: return attention_flash_builds<16>();
        case 32: return attention_flash_builds<32>();
        case 48: return attention_flash_builds<48>();
        case 64: return attention_flash_builds<64>();
        case 96: return attention_flash_builds<96>();
        case 128: return attention_flash_builds<128>();
        default: return false;
    }
}

int attention_flash_forward(float* out, const float* qkv, int B, int T, int NH, int HS, cudaStream_t stream) {
#define ENGINE_FLASH_CASE(H)                                                                                                 \
    case H:                                                                                                                  \
        if constexpr (attention_flash_builds<H>())                                                                          \
            return attention_flash_launch<H, ATTENTION_BR, ATTENTION_BC, ATTENTION_TM, ATTENTION_TN>(out, qkv, B, T, NH, stream); \
        break;
    switch (HS) {
        ENGINE_FLASH_CASE(16)
        ENGINE_FLASH_CASE(32)
        ENGINE_FLASH_CASE(48)
        ENGINE_FLASH_CASE(64)
        ENGINE_FLASH_CASE(96)
        ENGINE_FLASH_CASE(128)
        default: break;
    }
#undef ENGINE_FLASH_CASE
    fprintf(stderr, "attention_flash: head size %d is not built with BC/TN=%d; use the reference path\n", HS,
            ATTENTION_BC / ATTENTION_TN);
    return -1;
}

int attention_decode_forward(float* out, const float* qkv, const float* kcache, const float* vcache, const int* pos, int B,
                             int NH, int HS, int maxT, cudaStream_t stream) {
    constexpr int BLOCK = ATTENTION_DECODE_BLOCK_SIZE;
    if (!attention_row_supports(HS)) {
        fprintf(stderr, "attention_decode: head size %d, over the %d a block's lanes hold\n", HS, 32 * ATTENTION_ROW_DIMS);
        return -1;
    }
    const size_t smem = sizeof(float) * attention_row_smem_floats(BLOCK, HS);
    return engine_launch("attention", "attention_decode_kernel", attention_decode_kernel<BLOCK>, dim3(NH, B), dim3(BLOCK), smem,
                         stream, out, qkv, kcache, vcache, pos, NH, HS, maxT);
}

// Scratch the split decoding kernel needs for a B x NH cache of maxT positions:
// floats (the chunks' outputs, maxes and sums) and counters (one per head and
// sequence, zeroed once: the kernel leaves them zero).
size_t attention_decode_scratch_floats(int B, int NH, int HS, int maxT) {
    return (size_t)B * NH * CEIL_DIV(maxT, ATTENTION_DECODE_CHUNK) * (HS + 2);
}
size_t attention_decode_counters(int B, int NH) { return (size_t)B * NH; }

template <int BLOCK, int CHUNK>
int attention_decode_split_sized(float* out, const float* qkv, const float* kcache, const float* vcache, const int* pos,
                                 float* scratch, unsigned int* counters, int B, int NH, int HS, int maxT, cudaStream_t stream) {
    const int splits_max = CEIL_DIV(maxT, CHUNK);
    const size_t smem = sizeof(float) * ((size_t)(BLOCK / 32) * (HS + 2) + 3 * (size_t)splits_max);
    if (smem > 48 * 1024) {
        fprintf(stderr, "attention_decode_split: maxT=%d, HS=%d need %zu bytes of shared memory, over 48 KB\n", maxT, HS, smem);
        return -1;
    }
    if (!scratch || !counters) { fprintf(stderr, "attention_decode_split: no scratch (allocate the cache with gpt2_alloc_cache)\n"); return -1; }
    const AttentionDecodeScratch sc = AttentionDecodeScratch::at(scratch, B, NH, HS, splits_max);
    return engine_launch("attention", "attention_decode_split_kernel", attention_decode_split_kernel<BLOCK, CHUNK>,
                         dim3(NH, B, splits_max), dim3(BLOCK), smem, stream, out, qkv, kcache, vcache, pos, sc, counters, NH, HS,
                         maxT);
}

int attention_decode_split_forward(float* out, const float* qkv, const float* kcache, const float* vcache, const int* pos,
                                   float* scratch, unsigned int* counters, int B, int NH, int HS, int maxT, cudaStream_t stream) {
    return attention_decode_split_sized<ATTENTION_DECODE_BLOCK_SIZE, ATTENTION_DECODE_CHUNK>(
        out, qkv, kcache, vcache, pos, scratch, counters, B, NH, HS, maxT, stream);
}
