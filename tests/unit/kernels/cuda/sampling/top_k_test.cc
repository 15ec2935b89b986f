// TopKTopP (kernels/cuda/sampling/top_k.cu) under emulation against the CPU sampler's
// stages (ApplyTopK on the row, CandidateList::Reset + ToWeights, ApplyTopP,
// ApplyMinP from engine/sampling), in several execution orders, on rows that
// exercise the LightSeq bound (random and peaked rows), the exact bisection
// fallback (k beyond the 1024 groups, sorted and tied rows), ties at the k-th
// value, NaN / -inf / +inf, small vocabularies, and unsupported or
// overflowing rows.
// Tolerances: the kept set is identical; the device list is in the canonical
// order; probabilities (weight / weight_sum) within relative 1e-6 of the
// CPU's (the largest difference seen is printed).
#include "kernels/cuda/sampling/top_k.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampling/candidate_list.h"
#include "engine/sampling/logits_processor.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kProbabilityTolerance = 1e-6;

struct Row {
  std::vector<float> logits;
  TopKRowParams params;
};

// The CPU's surviving candidates as {token, probability}, sorted by token;
// `num_top_k` gets the size of the top-k set.
std::vector<std::pair<int32_t, double>> CpuKept(const Row& row, int32_t* num_top_k) {
  std::vector<float> logits = row.logits;
  std::vector<float> scratch;
  sampling::ApplyTopK(row.params.top_k, logits, &scratch);
  sampling::CandidateList list;
  list.Reset(logits);
  *num_top_k = static_cast<int32_t>(list.size());
  if (list.empty()) return {};
  list.ToWeights();
  sampling::ApplyTopP(row.params.top_p, &list);
  sampling::ApplyMinP(row.params.min_p, &list);
  const double sum = list.Sum();
  std::vector<std::pair<int32_t, double>> kept;
  for (const sampling::Candidate& c : list.items()) kept.push_back({c.token, c.value / sum});
  std::sort(kept.begin(), kept.end());
  return kept;
}

struct DeviceResult {
  std::vector<TopKRowResult> results;
  std::vector<int32_t> tokens;  // [rows, kTopKMaxCandidates]
  std::vector<float> weights;
};

DeviceResult RunTopK(const std::vector<Row>& rows, int32_t vocab) {
  std::vector<float> logits;
  std::vector<TopKRowParams> params;
  for (const Row& row : rows) {
    logits.insert(logits.end(), row.logits.begin(), row.logits.end());
    params.push_back(row.params);
  }
  const int32_t n = static_cast<int32_t>(rows.size());
  DeviceBuffer<float> device_logits(logits);
  DeviceBuffer<TopKRowParams> device_params(params);
  DeviceBuffer<int32_t> tokens(static_cast<size_t>(n) * kTopKMaxCandidates);
  DeviceBuffer<float> weights(static_cast<size_t>(n) * kTopKMaxCandidates);
  DeviceBuffer<TopKRowResult> results(n);
  const TopKParams p{device_logits.get(),
                     device_params.get(),
                     tokens.get(),
                     weights.get(),
                     results.get(),
                     n,
                     vocab};
  EXPECT_TRUE(TopKTopP(p, nullptr).ok());
  return {results.Download(), tokens.Download(), weights.Download()};
}

// Checks every row against the CPU; returns the largest relative
// probability difference.
double ExpectRowsMatch(const std::vector<Row>& rows, int32_t vocab) {
  const DeviceResult got = RunTopK(rows, vocab);
  double worst = 0.0;
  for (size_t r = 0; r < rows.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "row " << r << " k " << rows[r].params.top_k << " p "
                                      << rows[r].params.top_p << " min_p " << rows[r].params.min_p);
    int32_t num_top_k = 0;
    const std::vector<std::pair<int32_t, double>> expected = CpuKept(rows[r], &num_top_k);
    const TopKRowResult& result = got.results[r];
    EXPECT_EQ(result.num_top_k, num_top_k);
    if (result.num_kept != static_cast<int32_t>(expected.size())) {
      ADD_FAILURE() << "kept " << result.num_kept << ", CPU " << expected.size();
      continue;
    }
    const size_t base = r * kTopKMaxCandidates;
    std::vector<std::pair<int32_t, double>> kept;
    for (int32_t i = 0; i < result.num_kept; ++i) {
      kept.push_back({got.tokens[base + i], got.weights[base + i] / result.weight_sum});
      if (i > 0) {  // canonical order: weight descending, token ascending
        const float prev = got.weights[base + i - 1], cur = got.weights[base + i];
        EXPECT_TRUE(prev > cur || (prev == cur && got.tokens[base + i - 1] < got.tokens[base + i]))
            << "position " << i;
      }
    }
    std::sort(kept.begin(), kept.end());
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i].first != expected[i].first) {
        ADD_FAILURE() << "kept sets differ at " << i << ": " << kept[i].first << " vs "
                      << expected[i].first;
        break;
      }
      const double rel = std::fabs(kept[i].second / expected[i].second - 1.0);
      EXPECT_LE(rel, kProbabilityTolerance) << "token " << kept[i].first;
      worst = std::max(worst, rel);
    }
  }
  return worst;
}

std::vector<float> Uniform(std::mt19937& rng, int32_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class TopKTest : public cuda_emu::testing::OrderedTest {};

TEST_P(TopKTest, SmolLmVocabularyRows) {
  constexpr int32_t kVocab = 49152;
  std::mt19937 rng(1);
  std::vector<float> peaked(kVocab);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& x : peaked) x = normal(rng);
  peaked[123] = 25.0f;  // a confident model
  std::vector<float> quantized = Uniform(rng, kVocab, -10.0f, 10.0f);
  for (float& x : quantized) x = std::round(x * 2.0f) / 2.0f;  // ~1200 ties per value
  std::vector<float> increasing(kVocab);
  for (int32_t i = 0; i < kVocab; ++i) increasing[i] = static_cast<float>(i) * 1e-3f;
  const std::vector<Row> rows = {
      {Uniform(rng, kVocab, -10.0f, 10.0f), {50, 0.9f, 0.0f}},
      {Uniform(rng, kVocab, -5.0f, 5.0f), {1, 1.0f, 0.0f}},
      {peaked, {40, 1.0f, 0.05f}},
      {peaked, {200, 0.5f, 0.0f}},
      {Uniform(rng, kVocab, -3.0f, 3.0f), {2048, 0.95f, 0.01f}},  // k > groups: bisection
      {quantized, {10, 0.3f, 0.0f}},                              // ties at the k-th value
      {increasing, {100, 0.8f, 0.0f}},
  };
  const double worst = ExpectRowsMatch(rows, kVocab);
  std::printf("top-k vocab %d: max relative probability difference %.3g\n", kVocab, worst);
}

TEST_P(TopKTest, DeadValuesAndInfinities) {
  constexpr int32_t kVocab = 5000;
  std::mt19937 rng(2);
  std::vector<float> sprinkled = Uniform(rng, kVocab, -4.0f, 4.0f);
  for (int i = 0; i < 500; ++i) sprinkled[rng() % kVocab] = -kInf;
  for (int i = 0; i < 50; ++i) sprinkled[rng() % kVocab] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> three_live(kVocab, -kInf);
  three_live[7] = 1.0f;
  three_live[4000] = 2.0f;
  three_live[4999] = std::numeric_limits<float>::quiet_NaN();
  three_live[12] = 1.0f;
  std::vector<float> infinite = Uniform(rng, kVocab, -1.0f, 1.0f);
  infinite[9] = kInf;
  infinite[3] = std::numeric_limits<float>::max();
  infinite[77] = kInf;
  ExpectRowsMatch({{sprinkled, {64, 0.7f, 0.0f}},
                   {three_live, {10, 0.99f, 0.0f}},
                   {std::vector<float>(kVocab, -kInf), {5, 1.0f, 0.0f}},
                   {infinite, {2, 1.0f, 0.0f}},
                   {infinite, {5, 0.5f, 0.0f}}},
                  kVocab);
}

TEST_P(TopKTest, SmallVocabularies) {
  std::mt19937 rng(3);
  ExpectRowsMatch({{Uniform(rng, 37, -2.0f, 2.0f), {37, 0.9f, 0.0f}},
                   {Uniform(rng, 37, -2.0f, 2.0f), {100, 1.0f, 0.2f}},
                   {Uniform(rng, 37, -2.0f, 2.0f), {3, 0.1f, 0.0f}}},
                  37);
}

TEST_P(TopKTest, ReportsUnsupportedAndOverflowingRows) {
  constexpr int32_t kVocab = 3000;
  std::mt19937 rng(4);
  const std::vector<float> random = Uniform(rng, kVocab, -1.0f, 1.0f);
  const DeviceResult got = RunTopK({{random, {0, 0.9f, 0.0f}},
                                    {random, {kTopKMaxCandidates + 1, 1.0f, 0.0f}},
                                    {std::vector<float>(kVocab, 0.5f), {5, 1.0f, 0.0f}},
                                    {random, {5, 1.0f, 0.0f}}},
                                   kVocab);
  EXPECT_EQ(got.results[0].num_kept, kTopKUnsupported);
  EXPECT_EQ(got.results[1].num_kept, kTopKUnsupported);
  EXPECT_EQ(got.results[2].num_kept, kTopKOverflow);  // 3000 tied at the 5th value
  EXPECT_EQ(got.results[2].num_top_k, kVocab);
  EXPECT_EQ(got.results[3].num_kept, 5);  // the rows do not disturb each other
}

INSTANTIATE_TEST_SUITE_P(Orders, TopKTest, ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

TEST(TopKValidationTest, RejectsBadSizes) {
  TopKParams params;
  params.num_rows = 1;
  params.vocab_size = 0;
  const absl::Status status = TopKTopP(params, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("vocab_size 0"), std::string::npos) << status;
}

}  // namespace
}  // namespace tandem::cuda
