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
//   Decoding against the KV cache: attention_decode.cuh.
#pragma once
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
