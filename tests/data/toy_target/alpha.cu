#include "common.h"
#include <cmath>
static_assert(ALPHA_BLOCK <= 512, "ALPHA_BLOCK must be <= 512 (toy rule)");
// Fastest at `best` (128 by default); each factor of two away costs 30%; deterministic noise of about 1%.
double alpha_time_ns(int it, int best) {
    const double d = std::log2((double)ALPHA_BLOCK / best);
    return 1000.0 * (1.0 + 0.3 * d * d) * (1.0 + 0.01 * std::sin(12.9898 * it + ALPHA_BLOCK));
}
