// The device sampling draws under emulation: DrawTokens (sample_draw.cu) as
// the last stage of ApplyPenaltiesAndTemperature → TopKTopP → DrawTokens, and
// VocabDraw (vocab_draw.cu) over whole processed rows:
// - each gives the CPU Sampler's token for the same logits, parameters and
//   (seed, stream, step), on random rows (for VocabDraw also top-k off, many
//   tied logits, NaN / -inf / +inf entries);
// - a row draws the same token alone and inside a batch of other rows;
// - goodness of fit: many draws against the independent reference
//   distribution of the CPU sampler's chi-square tests (temperature, top-k,
//   top-p, min-p, combined), and the test has power;
// - rows with nothing to draw from give kNoDraw; bad arguments are refused.
#include "kernels/cuda/sampling/sample_draw.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "engine/sampling/sampler.h"
#include "kernels/cuda/sampling/logits.cuh"
#include "kernels/cuda/sampling/top_k.cuh"
#include "kernels/cuda/sampling/vocab_draw.cuh"
#include "tests/unit/engine/sampling/distribution_test_util.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;

struct Row {
  std::vector<float> logits;
  sampling::SamplingParams params;  // temperature, top_k (0: off), top_p, min_p
  DrawRowParams draw;
};

TopKRowParams TopKParamsOf(const sampling::SamplingParams& p, int32_t vocab) {
  return {.top_k = p.top_k > 0 ? p.top_k : vocab, .top_p = p.top_p, .min_p = p.min_p};
}

// TopKTopP's output for `rows` after temperature on the device.
struct Kept {
  std::vector<int32_t> tokens;  // [rows, kTopKMaxCandidates]
  std::vector<float> weights;
  std::vector<TopKRowResult> results;
};

// The rows' logits after ApplyPenaltiesAndTemperature (temperature only).
std::vector<float> ProcessedOnDevice(const std::vector<Row>& rows, int32_t vocab) {
  const int32_t n = static_cast<int32_t>(rows.size());
  std::vector<float> logits;
  std::vector<LogitsRowParams> logit_rows;
  for (const Row& row : rows) {
    logits.insert(logits.end(), row.logits.begin(), row.logits.end());
    logit_rows.push_back({.temperature = row.params.temperature});
  }
  DeviceBuffer<float> device_logits(logits);
  DeviceBuffer<LogitsRowParams> device_logit_rows(logit_rows);
  DeviceBuffer<int32_t> token_ids(std::vector<int32_t>{0});
  DeviceBuffer<int32_t> workspace(LogitsPenaltyWorkspaceBytes(n, vocab) / sizeof(int32_t));
  EXPECT_EQ(cudaMemset(workspace.get(), 0, LogitsPenaltyWorkspaceBytes(n, vocab)), cudaSuccess);
  EXPECT_TRUE(ApplyPenaltiesAndTemperature({device_logits.get(), device_logit_rows.get(),
                                            token_ids.get(), workspace.get(), n, vocab},
                                           nullptr)
                  .ok());
  return device_logits.Download();
}

Kept DeviceKept(const std::vector<Row>& rows, int32_t vocab) {
  const int32_t n = static_cast<int32_t>(rows.size());
  std::vector<TopKRowParams> top_k_rows;
  for (const Row& row : rows) top_k_rows.push_back(TopKParamsOf(row.params, vocab));
  DeviceBuffer<float> device_logits(ProcessedOnDevice(rows, vocab));
  DeviceBuffer<TopKRowParams> device_top_k_rows(top_k_rows);
  DeviceBuffer<int32_t> tokens(static_cast<size_t>(n) * kTopKMaxCandidates);
  DeviceBuffer<float> weights(static_cast<size_t>(n) * kTopKMaxCandidates);
  DeviceBuffer<TopKRowResult> results(n);
  EXPECT_TRUE(TopKTopP({device_logits.get(), device_top_k_rows.get(), tokens.get(), weights.get(),
                        results.get(), n, vocab},
                       nullptr)
                  .ok());
  return {tokens.Download(), weights.Download(), results.Download()};
}

// VocabDraw over the processed rows (no candidate kernel).
std::vector<int32_t> DeviceVocabSample(const std::vector<Row>& rows, int32_t vocab) {
  const int32_t n = static_cast<int32_t>(rows.size());
  std::vector<VocabDrawRowParams> params;
  for (const Row& row : rows) {
    params.push_back({row.params.top_k, row.params.top_p, row.params.min_p, row.draw});
  }
  DeviceBuffer<float> device_logits(ProcessedOnDevice(rows, vocab));
  DeviceBuffer<VocabDrawRowParams> device_params(params);
  DeviceBuffer<int32_t> out(n);
  EXPECT_TRUE(
      VocabDraw({device_logits.get(), device_params.get(), out.get(), n, vocab}, nullptr).ok());
  return out.Download();
}

// DrawTokens on `kept` (uploaded as is) with one counter per row.
std::vector<int32_t> Draw(const Kept& kept, const std::vector<DrawRowParams>& counters) {
  const int32_t n = static_cast<int32_t>(counters.size());
  DeviceBuffer<int32_t> tokens(kept.tokens);
  DeviceBuffer<float> weights(kept.weights);
  DeviceBuffer<TopKRowResult> results(kept.results);
  DeviceBuffer<DrawRowParams> rows(counters);
  DeviceBuffer<int32_t> out(n);
  EXPECT_TRUE(
      DrawTokens({tokens.get(), weights.get(), results.get(), rows.get(), out.get(), n}, nullptr)
          .ok());
  return out.Download();
}

std::vector<int32_t> DeviceSample(const std::vector<Row>& rows, int32_t vocab) {
  std::vector<DrawRowParams> counters;
  for (const Row& row : rows) counters.push_back(row.draw);
  return Draw(DeviceKept(rows, vocab), counters);
}

int32_t CpuSample(const Row& row, int32_t vocab) {
  sampling::Sampler sampler(vocab);
  const std::vector<int32_t> history(row.draw.step, 0);  // only its length matters here
  const sampling::SamplingRow cpu_row{.logits = row.logits.data(),
                                      .params = &row.params,
                                      .output_tokens = history,
                                      .seed = row.draw.seed,
                                      .stream = row.draw.stream};
  std::vector<sampling::SampleResult> result(1);
  sampler.SampleBatch(std::span(&cpu_row, 1), result, nullptr);
  return result[0].token;
}

Row RandomRow(std::mt19937& rng, int32_t vocab) {
  std::normal_distribution<float> logit(0.0f, 2.5f);
  std::uniform_int_distribution<int> top_k(0, 60);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  Row row;
  for (int32_t i = 0; i < vocab; ++i) row.logits.push_back(logit(rng));
  row.params.temperature = 0.3f + 1.5f * unit(rng);
  row.params.top_k = top_k(rng) < 20 ? 0 : top_k(rng);
  row.params.top_p = unit(rng) < 0.5f ? 1.0f : 0.5f + 0.5f * unit(rng);
  row.params.min_p = unit(rng) < 0.5f ? 0.0f : 0.2f * unit(rng);
  row.draw = {.seed = rng(), .stream = rng() % 4, .step = rng() % 300};
  return row;
}

class SampleDrawTest : public cuda_emu::testing::OrderedTest {};

TEST_P(SampleDrawTest, EqualsTheCpuSampler) {
  constexpr int32_t kVocab = 500;
  std::mt19937 rng(11);
  std::vector<Row> rows;
  for (int i = 0; i < 12; ++i) rows.push_back(RandomRow(rng, kVocab));
  const std::vector<int32_t> got = DeviceSample(rows, kVocab);
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(got[r], CpuSample(rows[r], kVocab))
        << "row " << r << " temperature " << rows[r].params.temperature << " top_k "
        << rows[r].params.top_k << " top_p " << rows[r].params.top_p << " min_p "
        << rows[r].params.min_p;
  }
}

// Rows for VocabDraw: random, some with top-k off, some with many tied
// logits, some with NaN, -inf and +inf entries.
std::vector<Row> VocabRows(std::mt19937& rng, int32_t vocab, int n) {
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i) {
    Row row = RandomRow(rng, vocab);
    if (i % 4 == 1) row.params.top_k = 0;
    if (i % 4 == 2) {
      for (float& l : row.logits) l = std::round(l * 2.0f) / 2.0f;
    }
    if (i % 4 == 3) {
      row.logits[3] = std::numeric_limits<float>::quiet_NaN();
      row.logits[7] = -std::numeric_limits<float>::infinity();
      if (i % 8 == 7) row.logits[11] = row.logits[12] = std::numeric_limits<float>::infinity();
    }
    rows.push_back(row);
  }
  return rows;
}

TEST_P(SampleDrawTest, VocabDrawEqualsTheCpuSampler) {
  constexpr int32_t kVocab = 400;
  std::mt19937 rng(23);
  const std::vector<Row> rows = VocabRows(rng, kVocab, 16);
  const std::vector<int32_t> got = DeviceVocabSample(rows, kVocab);
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(got[r], CpuSample(rows[r], kVocab))
        << "row " << r << " temperature " << rows[r].params.temperature << " top_k "
        << rows[r].params.top_k << " top_p " << rows[r].params.top_p << " min_p "
        << rows[r].params.min_p;
  }
}

// Once, in the default order (the ordered tests above vary it).
TEST(SampleDrawBatchTest, SameTokenAloneAndInABatch) {
  constexpr int32_t kVocab = 300;
  std::mt19937 rng(5);
  std::vector<Row> rows;
  for (int i = 0; i < 6; ++i) rows.push_back(RandomRow(rng, kVocab));
  const std::vector<int32_t> batch = DeviceSample(rows, kVocab);
  const std::vector<Row> vocab_rows = VocabRows(rng, kVocab, 6);
  const std::vector<int32_t> vocab_batch = DeviceVocabSample(vocab_rows, kVocab);
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(DeviceSample({rows[r]}, kVocab)[0], batch[r]) << "row " << r;
    EXPECT_EQ(DeviceVocabSample({vocab_rows[r]}, kVocab)[0], vocab_batch[r]) << "row " << r;
  }
}

TEST(SampleDrawBatchTest, NoCandidatesGiveNoDraw) {
  constexpr int32_t kVocab = 8;
  Row empty;
  empty.logits.assign(kVocab, -std::numeric_limits<float>::infinity());
  Row fine;
  fine.logits = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f};
  fine.params.top_k = 1;
  const std::vector<int32_t> got = DeviceSample({empty, fine}, kVocab);
  EXPECT_EQ(got[0], kNoDraw);
  EXPECT_EQ(got[1], 7);
  // A row TopKTopP could not handle (kTopKUnsupported) is not drawn either.
  Kept unsupported{std::vector<int32_t>(kTopKMaxCandidates, 0),
                   std::vector<float>(kTopKMaxCandidates, 1.0f),
                   {TopKRowResult{0, kTopKUnsupported, 0.0}}};
  EXPECT_EQ(Draw(unsupported, {DrawRowParams{}})[0], kNoDraw);
}

INSTANTIATE_TEST_SUITE_P(Orders, SampleDrawTest,
                         ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

// Goodness of fit: the kept candidates of the fit logits under `params`,
// copied to kDraws rows, each drawn with its own (stream, step).
// 6000 draws: the power test's wrong temperature scores ~230 against a 0.999
// quantile of ~44, and the file stays within minutes under ThreadSanitizer.
constexpr int kDraws = 6000;
constexpr int kSteps = 120;  // draws = streams x steps

std::vector<int> CountTokens(const std::vector<int32_t>& tokens, int32_t vocab) {
  std::vector<int> counts(vocab, 0);
  for (int32_t token : tokens) {
    EXPECT_GE(token, 0);
    EXPECT_LT(token, vocab);
    if (token >= 0 && token < vocab) ++counts[token];
  }
  return counts;
}

// The counter of draw i: streams x steps.
DrawRowParams Counter(uint64_t seed, int i) {
  return {.seed = seed,
          .stream = static_cast<uint64_t>(i / kSteps),
          .step = static_cast<uint64_t>(i % kSteps)};
}

std::vector<int> DrawCounts(const sampling::SamplingParams& params, uint64_t seed) {
  const std::vector<float>& logits = sampling::fit::FitLogits();
  const int32_t vocab = static_cast<int32_t>(logits.size());
  const Kept one = DeviceKept({Row{logits, params, {}}}, vocab);
  Kept many;
  std::vector<DrawRowParams> counters;
  for (int i = 0; i < kDraws; ++i) {
    many.tokens.insert(many.tokens.end(), one.tokens.begin(), one.tokens.end());
    many.weights.insert(many.weights.end(), one.weights.begin(), one.weights.end());
    many.results.push_back(one.results[0]);
    counters.push_back(Counter(seed, i));
  }
  return CountTokens(Draw(many, counters), vocab);
}

// The same through VocabDraw, one row per draw (fewer: a row costs ~130
// block-wide passes under emulation; its tokens also equal the CPU
// sampler's, EqualsTheCpuSampler above).
constexpr int kVocabDraws = 1000;

std::vector<int> VocabDrawCounts(const sampling::SamplingParams& params, uint64_t seed) {
  const std::vector<float>& logits = sampling::fit::FitLogits();
  const int32_t vocab = static_cast<int32_t>(logits.size());
  std::vector<Row> rows;
  for (int i = 0; i < kVocabDraws; ++i) rows.push_back(Row{logits, params, Counter(seed, i)});
  return CountTokens(DeviceVocabSample(rows, vocab), vocab);
}

// Checks the fit; returns the number of tokens the reference excludes.
int CheckFit(const sampling::SamplingParams& params, const sampling::fit::Expected& expected) {
  return sampling::fit::ExpectFit(
      DrawCounts(params, /*seed=*/20240601),
      sampling::fit::ExpectedProbs(sampling::fit::FitLogits(), expected));
}

sampling::SamplingParams Params(float temperature, int top_k, float top_p, float min_p) {
  sampling::SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

TEST(SampleDrawDistributionTest, Temperature) {
  EXPECT_EQ(CheckFit(Params(0.7f, 0, 1.0f, 0.0f), {.temperature = 0.7f}), 0);
  EXPECT_EQ(CheckFit(Params(1.5f, 0, 1.0f, 0.0f), {.temperature = 1.5f}), 0);
}

TEST(SampleDrawDistributionTest, TopK) {
  EXPECT_EQ(CheckFit(Params(1.2f, 6, 1.0f, 0.0f), {.temperature = 1.2f, .top_k = 6}), 20 - 6);
}

TEST(SampleDrawDistributionTest, TopP) {
  const int excluded = CheckFit(Params(1.0f, 0, 0.8f, 0.0f), {.top_p = 0.8});
  EXPECT_GT(excluded, 3);
  EXPECT_LT(excluded, 20 - 3);
}

TEST(SampleDrawDistributionTest, MinP) {
  const int excluded =
      CheckFit(Params(0.9f, 0, 1.0f, 0.15f), {.temperature = 0.9f, .min_p = 0.15});
  EXPECT_GT(excluded, 3);
  EXPECT_LT(excluded, 20 - 3);
}

TEST(SampleDrawDistributionTest, TopKTopPMinPCombined) {
  const int excluded = CheckFit(Params(1.3f, 10, 0.9f, 0.1f),
                                {.temperature = 1.3f, .top_k = 10, .top_p = 0.9, .min_p = 0.1});
  EXPECT_GE(excluded, 20 - 10);
}

// One combined case: top-k (VocabDraw's bisection), top-p and min-p.
TEST(SampleDrawDistributionTest, VocabDrawFits) {
  using sampling::fit::ExpectedProbs;
  using sampling::fit::FitLogits;
  EXPECT_GE(sampling::fit::ExpectFit(
                VocabDrawCounts(Params(1.3f, 10, 0.9f, 0.1f), 7),
                ExpectedProbs(FitLogits(),
                              {.temperature = 1.3f, .top_k = 10, .top_p = 0.9, .min_p = 0.1})),
            20 - 10);
}

// The test has power: the same draws fail against a nearby wrong temperature.
TEST(SampleDrawDistributionTest, DetectsAWrongDistribution) {
  const std::vector<double> wrong =
      sampling::fit::ExpectedProbs(sampling::fit::FitLogits(), {.temperature = 0.85f});
  const auto [stat, df] =
      sampling::fit::ChiSquare(DrawCounts(Params(0.7f, 0, 1.0f, 0.0f), 20240601), wrong);
  EXPECT_GT(stat, sampling::fit::Chi2Quantile999(df));
}

TEST(SampleDrawArgumentsTest, RefusesBadArguments) {
  DeviceBuffer<int32_t> tokens(kTopKMaxCandidates), out(1);
  DeviceBuffer<float> weights(kTopKMaxCandidates);
  DeviceBuffer<TopKRowResult> results(1);
  DeviceBuffer<DrawRowParams> rows(1);
  const DrawParams ok{tokens.get(), weights.get(), results.get(), rows.get(), out.get(), 1};
  DrawParams no_rows = ok;
  no_rows.num_rows = 0;
  const absl::Status s = DrawTokens(no_rows, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_rows 0"), std::string_view::npos) << s;
  DrawParams null_out = ok;
  null_out.out_tokens = nullptr;
  EXPECT_EQ(DrawTokens(null_out, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::cuda
