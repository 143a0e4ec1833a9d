// conf.cuh: launch sizes for best of sweep toy.
// Generated from tests/data/toy_space.yaml at commit 2bcfc9a4bd63 (config hash -); do not edit:
// change the space file and run `python config_sweep.py run tests/data/toy_space.yaml` again.
#pragma once

#define ALPHA_BLOCK 128
#define BETA_X 64
#define BETA_Y 4

