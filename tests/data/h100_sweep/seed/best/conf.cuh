// conf.cuh: launch sizes for best of sweep seed.
// Generated from /tmp/j/seed-one-change.yaml at commit unknown (config hash -); do not edit:
// change the space file and run `python config_sweep.py run /tmp/j/seed-one-change.yaml` again.
#pragma once

#define RESIDUAL_BLOCK_SIZE 128
#define GELU_BLOCK_SIZE 512
#define ENCODER_BLOCK_X 8
#define ENCODER_BLOCK_Y 8
#define ENCODER_BLOCK_Z 8
#define LAYERNORM_BLOCK_SIZE 256
#define PREPARE_BLOCK_SIZE 256
#define MATMUL_TILE 16
