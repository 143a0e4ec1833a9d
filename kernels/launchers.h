// launchers.h: the host launchers of every kernel family, as the model (gpt2.cu)
// calls them. Each is defined in its family's .cuh and compiled once, in
// units/<family>.cu, with the launch sizes of conf.cuh. Every launcher returns 0,
// or -1 after printing what failed.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "types.h"

int encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, const int* start_pos, int B, int T,
                    int C, cudaStream_t stream);
int layernorm_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, float eps,
                      cudaStream_t stream);
int residual_layernorm_forward(float* x_out, float* ln_out, const float* x_in, const float* y, const float* y_bias,
                               const float* weight, const float* bias, int N, int C, float eps, cudaStream_t stream);
int residual_forward(float* out, const float* a, const float* b, int N, cudaStream_t stream);
int gelu_forward(float* out, const float* inp, int N, cudaStream_t stream);
int prepare_forward(Epilogue e, float* out, const float* bias, const float* residual, int N, int OC, cudaStream_t stream);
int matmul_forward(MatmulImpl impl, float* out, const float* A, const float* W, int M, int N, int K, cudaStream_t stream);
// An own kernel (impl Own or Tf32x3) with the epilogue in its stores: out = epilogue(A . W^T + bias).
int matmul_fused_forward(MatmulImpl impl, Epilogue e, float* out, const float* A, const float* W, const float* bias,
                         const float* residual, int M, int N, int K, cudaStream_t stream);
int matvec_forward(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual, int M,
                   int N, int K, cudaStream_t stream);
// The decoding step's matvec (split-K across the warps of a block, version 5): with a
// RowNorm it LayerNorms A's rows first (if matvec_decode_folds_layernorm(M, K)); with a
// KVWrite (the qkv layer) it also stores k and v into the cache, and with its `attention`
// runs each head's attention in the block that completes the head; with a TokenPick (the
// LM head) it also folds its logits into each row's best for token_pick_forward, which
// then picks the next token as argmax_forward with advance does.
int matvec_decode_forward(Epilogue e, float* out, const float* A, const float* W, const float* bias, const float* residual,
                          int M, int N, int K, cudaStream_t stream, RowNorm ln, KVWrite kv, TokenPick pick = {});
int token_pick_forward(const TokenPick& pick, int M, cudaStream_t stream);
bool matvec_decode_folds_layernorm(int M, int K);
// Whether the decoding step folds a layer's attention into its qkv matvec (KVWrite::attention).
bool matvec_decode_attends(int M, int C, int heads, int maxT);
int matmul_max_matvec_rows();
bool matmul_has_cublas();
int softmax_forward(float* att, const float* preatt, int rows, int T, cudaStream_t stream);
int attention_qk_forward(float* preatt, const float* qkv, int B, int T, int NH, int HS, cudaStream_t stream);
int attention_av_forward(float* out, const float* att, const float* qkv, int B, int T, int NH, int HS, cudaStream_t stream);
bool attention_flash_supports(int HS);
int attention_flash_forward(float* out, const float* qkv, int B, int T, int NH, int HS, cudaStream_t stream);
int attention_decode_forward(float* out, const float* qkv, const float* kcache, const float* vcache, const int* pos, int B,
                             int NH, int HS, int maxT, cudaStream_t stream);
// The decoding step's attention: chunks of positions over blocks (flash-decoding), scratch
// and counters from the cache (attention_decode_scratch_floats and _counters of them).
int attention_decode_split_forward(float* out, const float* qkv, const float* kcache, const float* vcache, const int* pos,
                                   float* scratch, unsigned int* counters, int B, int NH, int HS, int maxT, cudaStream_t stream);
size_t attention_decode_scratch_floats(int B, int NH, int HS, int maxT);
size_t attention_decode_counters(int B, int NH);
int kv_cache_write_forward(float* kcache, float* vcache, const float* qkv, const int* start, int B, int T, int NH, int HS,
                           int maxT, cudaStream_t stream);
// advance: also move *pos on by one once every row has read it (the end of a decoding step).
int argmax_forward(int* next_token, int* sequence, int* pos, const float* logits, int B, int V, long long stride, int maxT,
                   ArgmaxScratch scratch, bool advance, cudaStream_t stream);
size_t argmax_scratch_slots(int B);
