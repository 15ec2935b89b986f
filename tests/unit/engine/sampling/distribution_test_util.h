// Shared helpers for the goodness-of-fit tests of the sampler and the
// speculative verifier: an independent reference of the processed
// distribution (straightforward code: full sorts, double precision) and
// Pearson's chi-square against it.
#ifndef TANDEM_TESTS_UNIT_ENGINE_SAMPLING_DISTRIBUTION_TEST_UTIL_H_
#define TANDEM_TESTS_UNIT_ENGINE_SAMPLING_DISTRIBUTION_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::sampling::fit {

// Upper 0.999 quantiles of chi-square with df = 1..20.
inline double Chi2Quantile999(int df) {
  static const double kTable[] = {10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322,
                                  26.124, 27.877, 29.588, 31.264, 32.909, 34.528, 36.123,
                                  37.697, 39.252, 40.790, 42.312, 43.820, 45.315};
  EXPECT_GE(df, 1);
  EXPECT_LE(df, 20);
  return kTable[std::clamp(df, 1, 20) - 1];
}

// Fixed logits for the goodness-of-fit tests (host and device sampling),
// spread enough that truncation stages cut somewhere useful.
inline const std::vector<float>& FitLogits() {
  static const std::vector<float> logits = {
      1.20f, -0.40f, 2.10f, 0.30f,  0.95f, -1.60f, 1.75f, 0.00f, -0.80f, 1.50f,
      0.60f, -2.00f, 0.10f, 2.40f, -0.20f, 0.80f,  1.10f, -1.10f, 0.45f, -0.60f};
  return logits;
}

// The processing knobs the reference pipeline models.
struct Expected {
  float temperature = 1.0f;
  int top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
};

// The reference pipeline on `logits` (already masked / penalized): temperature
// softmax, then top-k on probability rank, top-p on the descending cumulative
// sum, min-p against the max, each followed by renormalization.
inline std::vector<double> ExpectedProbs(const std::vector<float>& logits, const Expected& e) {
  const int vocab = static_cast<int>(logits.size());
  std::vector<double> p(vocab);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += p[i] = std::exp(double{logits[i]} / e.temperature);
  for (double& x : p) x /= sum;
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  std::vector<bool> keep(vocab, true);
  if (e.top_k > 0) {
    for (int r = e.top_k; r < vocab; ++r) keep[order[r]] = false;
  }
  auto renormalize = [&] {
    double s = 0.0;
    for (int i = 0; i < vocab; ++i) s += keep[i] ? p[i] : 0.0;
    for (int i = 0; i < vocab; ++i) p[i] = keep[i] ? p[i] / s : 0.0;
  };
  renormalize();
  if (e.top_p < 1.0) {
    double before = 0.0;
    for (int i : order) {
      if (before >= e.top_p) keep[i] = false;
      before += p[i];
    }
    renormalize();
  }
  if (e.min_p > 0.0) {
    const double max_p = *std::max_element(p.begin(), p.end());
    for (int i = 0; i < vocab; ++i) {
      if (p[i] < e.min_p * max_p) keep[i] = false;
    }
    renormalize();
  }
  return p;
}

// Pearson chi-square of `counts` against `probs` over tokens with positive
// expected probability; bins expected below 5 draws are pooled so the
// asymptotic distribution holds. Returns {statistic, degrees of freedom}.
inline std::pair<double, int> ChiSquare(const std::vector<int>& counts,
                                        const std::vector<double>& probs) {
  const double draws = std::accumulate(counts.begin(), counts.end(), 0.0);
  double stat = 0.0;
  int bins = 0;
  double pooled_expected = 0.0;
  double pooled_observed = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    const double expected = probs[i] * draws;
    if (expected < 5.0) {
      pooled_expected += expected;
      pooled_observed += counts[i];
      continue;
    }
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++bins;
  }
  if (pooled_expected > 0.0) {
    stat += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) /
            pooled_expected;
    ++bins;
  }
  return {stat, bins - 1};
}

// Expects `counts` (draws per token) to fit `probs`: tokens of probability 0
// never drawn, chi-square below its 0.999 quantile. Returns the number of
// tokens `probs` excludes, for the caller to sanity-check.
inline int ExpectFit(const std::vector<int>& counts, const std::vector<double>& probs) {
  int excluded = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0.0) {
      ++excluded;
      EXPECT_EQ(counts[i], 0) << "excluded token " << i << " was drawn";
    }
  }
  const auto [stat, df] = ChiSquare(counts, probs);
  EXPECT_LT(stat, Chi2Quantile999(df)) << "df " << df;
  return excluded;
}

}  // namespace tandem::sampling::fit

#endif  // TANDEM_TESTS_UNIT_ENGINE_SAMPLING_DISTRIBUTION_TEST_UTIL_H_
