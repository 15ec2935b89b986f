// Goodness-of-fit tests: the Sampler's empirical token frequencies, over many
// draws at a fixed seed with varying streams and steps, against the processed
// distribution computed here independently with straightforward code (full
// sorts, double precision). Each test asserts Pearson's chi-square statistic
// below the 0.999 quantile for its degrees of freedom, and that tokens the
// processing excludes are never drawn.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/sampling/distribution_test_util.h"

namespace tandem::sampling {
namespace {

using fit::ChiSquare;
using fit::Chi2Quantile999;
using fit::Expected;

constexpr int32_t kVocab = 20;
constexpr int kDraws = 24000;
constexpr int kSteps = 120;  // draws = streams x steps

const std::vector<float>& Logits() { return fit::FitLogits(); }

// The reference pipeline on this file's logits.
std::vector<double> ExpectedProbs(const Expected& e) { return fit::ExpectedProbs(Logits(), e); }

std::vector<int> DrawCounts(const SamplingParams& params, uint64_t seed) {
  Sampler sampler(kVocab);
  const std::vector<int32_t> history(kSteps, 0);  // only its length matters here
  std::vector<SamplingRow> rows;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t stream = static_cast<uint64_t>(i / kSteps);
    const size_t step = static_cast<size_t>(i % kSteps);
    rows.push_back(SamplingRow{.logits = Logits().data(),
                               .params = &params,
                               .output_tokens = std::span<const int32_t>(history).first(step),
                               .seed = seed,
                               .stream = stream});
  }
  std::vector<SampleResult> results(rows.size());
  sampler.SampleBatch(rows, results, nullptr);
  std::vector<int> counts(kVocab, 0);
  for (const SampleResult& r : results) {
    EXPECT_GE(r.token, 0);
    EXPECT_LT(r.token, kVocab);
    ++counts[r.token];
  }
  return counts;
}

// Samples with `params` and checks the fit against `expected`; returns the
// number of tokens the reference excludes, for the caller to sanity-check.
int CheckFit(const SamplingParams& params, const Expected& expected) {
  return fit::ExpectFit(DrawCounts(params, /*seed=*/20240601), ExpectedProbs(expected));
}

TEST(SamplerDistributionTest, TemperatureLow) {
  SamplingParams params;
  params.temperature = 0.7f;
  EXPECT_EQ(CheckFit(params, {.temperature = 0.7f}), 0);
}

TEST(SamplerDistributionTest, TemperatureHigh) {
  SamplingParams params;
  params.temperature = 1.5f;
  EXPECT_EQ(CheckFit(params, {.temperature = 1.5f}), 0);
}

TEST(SamplerDistributionTest, TopK) {
  SamplingParams params;
  params.temperature = 1.2f;
  params.top_k = 6;
  EXPECT_EQ(CheckFit(params, {.temperature = 1.2f, .top_k = 6}), kVocab - 6);
}

TEST(SamplerDistributionTest, TopP) {
  SamplingParams params;
  params.top_p = 0.8f;
  const int excluded = CheckFit(params, {.top_p = 0.8});
  EXPECT_GT(excluded, 3);
  EXPECT_LT(excluded, kVocab - 3);
}

TEST(SamplerDistributionTest, MinP) {
  SamplingParams params;
  params.temperature = 0.9f;
  params.min_p = 0.15f;
  const int excluded = CheckFit(params, {.temperature = 0.9f, .min_p = 0.15});
  EXPECT_GT(excluded, 3);
  EXPECT_LT(excluded, kVocab - 3);
}

TEST(SamplerDistributionTest, TopKTopPMinPCombined) {
  SamplingParams params;
  params.temperature = 1.3f;
  params.top_k = 10;
  params.top_p = 0.9f;
  params.min_p = 0.1f;
  const int excluded =
      CheckFit(params, {.temperature = 1.3f, .top_k = 10, .top_p = 0.9, .min_p = 0.1});
  EXPECT_GE(excluded, kVocab - 10);
}

// The test has power: the same draws fail against a nearby wrong temperature.
TEST(SamplerDistributionTest, DetectsAWrongDistribution) {
  SamplingParams params;
  params.temperature = 0.7f;
  const std::vector<int> counts = DrawCounts(params, 20240601);
  const auto [stat, df] = ChiSquare(counts, ExpectedProbs({.temperature = 0.85f}));
  EXPECT_GT(stat, Chi2Quantile999(df));
}

}  // namespace
}  // namespace tandem::sampling
