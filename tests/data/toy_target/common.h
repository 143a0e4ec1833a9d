// Launch sizes come from conf.cuh, as in the engine.
#pragma once
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#ifndef ALPHA_BLOCK
#define ALPHA_BLOCK 256
#endif
#ifndef BETA_X
#define BETA_X 32
#endif
#ifndef BETA_Y
#define BETA_Y 1
#endif
double alpha_time_ns(int iteration);
double beta_time_ns(int iteration);
