// conf.cuh: launch sizes for best of sweep inference.
// Generated from spaces/inference.yaml at commit 355edbdf5e36 (config hash -); do not edit:
// change the space file and run `python config_sweep.py run spaces/inference.yaml` again.
#pragma once

#define ENCODER_BLOCK_X 16
#define ENCODER_BLOCK_Y 8
#define ENCODER_BLOCK_Z 1
#define LAYERNORM_BLOCK_SIZE 128
#define RESLN_BLOCK_SIZE 256
#define MATMUL_BM 64
#define MATMUL_BN 128
#define MATMUL_BK 16
#define MATMUL_WM 64
#define MATMUL_WN 32
#define MATMUL_TM 8
#define MATMUL_TN 8
#define MATMUL_STAGES 2
#define ATTENTION_BR 32
#define ATTENTION_BC 64
#define ATTENTION_TM 4
#define ATTENTION_TN 4
