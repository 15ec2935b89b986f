#include "client/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/logging.h"

namespace tandem::client {

double Mean(std::span<const double> samples) {
  if (samples.empty()) return 0;
  return std::accumulate(samples.begin(), samples.end(), 0.0) /
         static_cast<double>(samples.size());
}

double PercentileOfSorted(std::span<const double> sorted, double q) {
  CHECK(q >= 0 && q <= 100, "percentile %g is out of range: must be in [0, 100]", q);
  if (sorted.empty()) return 0;
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

LatencySummary Summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  LatencySummary s;
  s.mean = Mean(samples);
  s.p50 = PercentileOfSorted(samples, 50);
  s.p90 = PercentileOfSorted(samples, 90);
  s.p99 = PercentileOfSorted(samples, 99);
  return s;
}

}  // namespace tandem::client
