// conf.cuh: launch sizes for best of sweep seed-ncu.
// Generated from spaces/seed.yaml at commit unknown (config hash -); do not edit:
// change the space file and run `python config_sweep.py run spaces/seed.yaml` again.
#pragma once

#define RESIDUAL_BLOCK_SIZE 1024
#define GELU_BLOCK_SIZE 512
#define ENCODER_BLOCK_X 6
#define ENCODER_BLOCK_Y 6
#define ENCODER_BLOCK_Z 6
#define LAYERNORM_BLOCK_SIZE 256
#define PREPARE_BLOCK_SIZE 512
#define MATMUL_TILE 16
