// Summary statistics for `tandem bench` latencies: mean and percentiles over a
// list of samples. Pure functions; an empty list summarizes to zeros (a run in
// which every request failed still reports).
#ifndef TANDEM_CLIENT_BENCH_STATS_H_
#define TANDEM_CLIENT_BENCH_STATS_H_

#include <span>
#include <vector>

namespace tandem::client {

struct LatencySummary {
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
};

// Arithmetic mean; 0 for no samples.
double Mean(std::span<const double> samples);

// The `q`-th percentile (q in [0, 100], CHECKed) of `sorted` (ascending), by
// linear interpolation between the closest ranks — the definition of numpy's
// default percentile, which vLLM's and SGLang's benchmarks report: rank
// q/100 * (n - 1). 0 for no samples; the sample itself for one.
double PercentileOfSorted(std::span<const double> sorted, double q);

// Mean, p50, p90 and p99 of `samples` (any order).
LatencySummary Summarize(std::vector<double> samples);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_STATS_H_
