// conf.cuh: launch sizes for best of sweep seed-events.
// Generated from spaces/seed.yaml at commit unknown (config hash -); do not edit:
// change the space file and run `python config_sweep.py run spaces/seed.yaml` again.
#pragma once

#define RESIDUAL_BLOCK_SIZE 256
#define GELU_BLOCK_SIZE 256
#define ENCODER_BLOCK_X 9
#define ENCODER_BLOCK_Y 9
#define ENCODER_BLOCK_Z 9
#define LAYERNORM_BLOCK_SIZE 256
#define PREPARE_BLOCK_SIZE 256
#define MATMUL_TILE 16
