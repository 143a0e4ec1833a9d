#include "common.h"
#include <cmath>
// Fastest at 64 x 4.
double beta_time_ns(int it) {
    const double dx = std::log2((double)BETA_X / 64.0), dy = std::log2((double)BETA_Y / 4.0);
    return 2000.0 * (1.0 + 0.2 * dx * dx + 0.1 * dy * dy) * (1.0 + 0.01 * std::cos(78.233 * it + BETA_X * 7 + BETA_Y));
}
