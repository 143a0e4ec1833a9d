// conf.cuh: launch sizes for R128_G128_E8x8x8_L128_P128_F16 of sweep seed.
// Generated from <ROOT>/spaces/seed.yaml at commit 0123456789ab (config hash fedcba9876543210); do not edit:
// change the space file and run `config-sweep run <ROOT>/spaces/seed.yaml` again.
#pragma once

#define RESIDUAL_BLOCK_SIZE 128
#define GELU_BLOCK_SIZE 128
#define ENCODER_BLOCK_X 8
#define ENCODER_BLOCK_Y 8
#define ENCODER_BLOCK_Z 8
#define LAYERNORM_BLOCK_SIZE 128
#define PREPARE_BLOCK_SIZE 128
#define MATMUL_TILE 16
