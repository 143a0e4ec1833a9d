// stats.h: order statistics for the timing programs (median, min, max, mean, std).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

struct Stats {
    double median = 0, min = 0, max = 0, mean = 0, std = 0;
};

inline Stats summarize(std::vector<double> v) {
    Stats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.min = v.front();
    s.max = v.back();
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / n;
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.std = n > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
    return s;
}
