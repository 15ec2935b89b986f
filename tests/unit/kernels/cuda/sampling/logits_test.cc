// The logits kernels (kernels/cuda/sampling/logits.cu) under emulation against the CPU
// stages of engine/sampling/logits_processor.h and kernels::LogSoftmaxNormalizer
// on random rows, in several execution orders.
// Tolerances: penalties and temperature bit-identical (the same float
// operations, unfused); min-p the identical kept set; the normalizer's max
// exact and its sum within relative 1e-6 (the largest difference seen is
// printed; only the summation order differs under emulation).
#include "kernels/cuda/sampling/logits.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampling/candidate_list.h"
#include "engine/sampling/logits_processor.h"
#include "kernels/kernels.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Rows of logits in [-10, 10) with a sprinkle of -inf and NaN.
std::vector<float> RandomRows(std::mt19937& rng, int32_t rows, int32_t vocab) {
  std::uniform_real_distribution<float> uniform(-10.0f, 10.0f);
  std::vector<float> logits(static_cast<size_t>(rows) * vocab);
  for (float& x : logits) x = uniform(rng);
  for (int i = 0; i < rows * 3; ++i) logits[rng() % logits.size()] = -kInf;
  logits[rng() % logits.size()] = std::numeric_limits<float>::quiet_NaN();
  return logits;
}

// Ids drawn from a few hundred distinct ones, so repeats and prompt/output
// overlap are common.
std::vector<int32_t> RandomIds(std::mt19937& rng, int n, int32_t vocab) {
  std::vector<int32_t> ids(n);
  const int32_t pool = std::min<int32_t>(vocab, 300);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % pool) * (vocab / pool);
  return ids;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

void ExpectPenaltiesMatch(int32_t vocab, const std::vector<LogitsRowParams>& shapes,
                          uint32_t seed) {
  std::mt19937 rng(seed);
  const int32_t num_rows = static_cast<int32_t>(shapes.size());
  std::vector<float> logits = RandomRows(rng, num_rows, vocab);
  std::vector<float> expected = logits;
  std::vector<LogitsRowParams> rows = shapes;
  std::vector<int32_t> ids;
  std::vector<uint8_t> seen(vocab, 0);
  std::vector<int32_t> counts(vocab, 0);
  for (int32_t r = 0; r < num_rows; ++r) {
    LogitsRowParams& row = rows[r];
    const std::vector<int32_t> prompt = RandomIds(rng, row.prompt_len, vocab);
    const std::vector<int32_t> output = RandomIds(rng, row.output_len, vocab);
    row.prompt_begin = static_cast<int32_t>(ids.size());
    ids.insert(ids.end(), prompt.begin(), prompt.end());
    row.output_begin = static_cast<int32_t>(ids.size());
    ids.insert(ids.end(), output.begin(), output.end());
    std::span<float> cpu(expected.data() + static_cast<size_t>(r) * vocab, vocab);
    sampling::ApplyRepetitionPenalty(cpu, prompt, output, row.repetition_penalty, seen);
    sampling::ApplyFrequencyPresencePenalties(cpu, output, row.frequency_penalty,
                                              row.presence_penalty, counts);
    if (row.temperature > 0.0f && row.temperature != 1.0f) {
      sampling::ApplyTemperature(cpu, row.temperature);
    }
  }
  if (ids.empty()) ids.push_back(0);
  DeviceBuffer<float> device_logits(logits);
  DeviceBuffer<LogitsRowParams> device_rows(rows);
  DeviceBuffer<int32_t> device_ids(ids);
  DeviceBuffer<int32_t> workspace(
      std::vector<int32_t>(LogitsPenaltyWorkspaceBytes(num_rows, vocab) / 4, 0));
  LogitsPenaltyParams params{device_logits.get(), device_rows.get(), device_ids.get(),
                             workspace.get(),     num_rows,          vocab};
  ASSERT_TRUE(ApplyPenaltiesAndTemperature(params, nullptr).ok());
  const std::vector<float> got = device_logits.Download();
  int mismatches = 0, changed = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    changed += !SameBits(expected[i], logits[i]);
    if (!SameBits(got[i], expected[i]) && ++mismatches <= 5) {
      ADD_FAILURE() << "row " << i / vocab << " id " << i % vocab << ": got " << got[i] << ", CPU "
                    << expected[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(changed, 0) << "the parameters changed nothing: the test would prove nothing";
  for (int32_t x : workspace.Download()) ASSERT_EQ(x, 0) << "workspace not left zero";
}

class LogitsTest : public cuda_emu::testing::OrderedTest {};

TEST_P(LogitsTest, PenaltiesAndTemperatureAreBitIdentical) {
  // repetition, frequency, presence, temperature, -, prompt_len, -, output_len
  ExpectPenaltiesMatch(49152,
                       {{1.3f, 0.5f, 0.25f, 0.7f, 0, 300, 0, 120},
                        {0.8f, 0.0f, 0.0f, 1.0f, 0, 50, 0, 0},
                        {1.0f, 0.2f, 0.0f, 1.5f, 0, 0, 0, 200},
                        {1.1f, 0.0f, 0.4f, 0.0f, 0, 17, 0, 33}},
                       1);
  ExpectPenaltiesMatch(1001,
                       {{1.5f, 1.0f, 1.0f, 0.3f, 0, 700, 0, 500}, {1.0f, 0, 0, 1, 0, 0, 0, 0}}, 2);
}

// The kept set of min-p: device rows after ApplyMinP versus the CPU's
// CandidateList (Reset, ToWeights, ApplyMinP).
void ExpectMinPMatches(std::vector<float> logits, int32_t vocab, const std::vector<float>& min_p) {
  const int32_t num_rows = static_cast<int32_t>(min_p.size());
  DeviceBuffer<float> device_logits(logits);
  DeviceBuffer<float> device_min_p(min_p);
  ASSERT_TRUE(ApplyMinP(device_logits.get(), device_min_p.get(), num_rows, vocab, nullptr).ok());
  const std::vector<float> got = device_logits.Download();
  for (int32_t r = 0; r < num_rows; ++r) {
    std::span<const float> row(logits.data() + static_cast<size_t>(r) * vocab, vocab);
    sampling::CandidateList candidates;
    candidates.Reset(row);
    std::vector<int32_t> expected;
    if (!candidates.empty()) {
      candidates.ToWeights();
      sampling::ApplyMinP(min_p[r], &candidates);
      for (const sampling::Candidate& c : candidates.items()) expected.push_back(c.token);
    }
    std::vector<int32_t> kept;
    for (int32_t i = 0; i < vocab; ++i) {
      const float x = got[static_cast<size_t>(r) * vocab + i];
      if (x > -kInf) kept.push_back(i);
      if (x > -kInf || std::isnan(x)) {
        EXPECT_TRUE(SameBits(x, row[i])) << "row " << r << " id " << i << " changed";
      }
    }
    EXPECT_EQ(kept, expected) << "row " << r << " min_p " << min_p[r];
  }
}

TEST_P(LogitsTest, MinPKeepsTheCpuSet) {
  std::mt19937 rng(3);
  const int32_t vocab = 49152;
  // Logits in [-10, 10): min_p 0.001 keeps the few within ~6.9 of the max.
  ExpectMinPMatches(RandomRows(rng, 4, vocab), vocab, {0.0f, 0.001f, 0.3f, 1.0f});
  // +inf clamps to the largest float; all -inf leaves nothing.
  std::vector<float> odd(3 * 8, 1.0f);
  odd[2] = kInf;
  odd[5] = std::numeric_limits<float>::max();
  for (int i = 8; i < 16; ++i) odd[i] = -kInf;
  odd[16] = 2.0f;
  odd[17] = std::numeric_limits<float>::quiet_NaN();
  ExpectMinPMatches(odd, 8, {0.5f, 0.5f, 0.3f});
}

TEST_P(LogitsTest, NormalizersMatchTheCpu) {
  std::mt19937 rng(4);
  const int32_t vocab = 49152;
  std::vector<float> logits = RandomRows(rng, 3, vocab);
  std::vector<float> odd = {-kInf, std::numeric_limits<float>::quiet_NaN(),
                            -kInf,  // nothing
                            1.0f,  kInf,
                            3.0f,  // +inf
                            -2.0f, std::numeric_limits<float>::quiet_NaN(),
                            5.0f};
  double worst = 0.0;
  for (auto [rows, n] : {std::pair{&logits, vocab}, std::pair{&odd, 3}}) {
    const int32_t num_rows = static_cast<int32_t>(rows->size() / n);
    DeviceBuffer<float> device_logits(*rows);
    DeviceBuffer<LogSoftmaxNormalizerResult> out(num_rows);
    ASSERT_TRUE(LogSoftmaxNormalizers(device_logits.get(), num_rows, n, out.get(), nullptr).ok());
    const std::vector<LogSoftmaxNormalizerResult> got = out.Download();
    for (int32_t r = 0; r < num_rows; ++r) {
      const kernels::SoftmaxNormalizer expected =
          kernels::LogSoftmaxNormalizer(rows->data() + static_cast<size_t>(r) * n, n);
      EXPECT_TRUE(SameBits(got[r].max, expected.max)) << got[r].max << " vs " << expected.max;
      EXPECT_NEAR(got[r].sum, expected.sum, 1e-6 * expected.sum) << "row " << r;
      if (expected.sum > 0) worst = std::max(worst, std::fabs(got[r].sum / expected.sum - 1));
    }
  }
  std::printf("log-softmax normalizer: max relative sum difference %.3g\n", worst);
}

INSTANTIATE_TEST_SUITE_P(Orders, LogitsTest, ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

TEST(LogitsValidationTest, RejectsBadSizes) {
  DeviceBuffer<float> logits(8);
  EXPECT_EQ(ApplyMinP(logits.get(), logits.get(), 1, 0, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogSoftmaxNormalizers(logits.get(), 0, 8, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  LogitsPenaltyParams params{logits.get(), nullptr, nullptr, nullptr, 1, 8};
  const absl::Status status = ApplyPenaltiesAndTemperature(params, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("workspace"), std::string::npos) << status;
}

}  // namespace
}  // namespace tandem::cuda
