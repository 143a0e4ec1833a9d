// One translation unit per kernel family, so a change to one family's launch
// sizes recompiles only its object (the sweep caches objects by content).
#include "../attention_decode.cuh"
