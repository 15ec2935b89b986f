// Speculative verification on the (emulated) device: DeviceSampler rows with
// a draft token against the CPU SpeculativeVerifier::VerifyPosition on the
// same rows, and the distribution of what the device emits.
//
// EqualsTheCpuVerifier: greedy rows (the draft the argmax or not) and
// sampling rows through the candidate kernel (top-k 7 / 50) or over the
// whole vocabulary (top-k off or past 2048: VocabDraw), with top-p, min-p,
// penalties and the min-tokens mask, drafts one-hot or drawn from a q whose
// support may hold duplicates, may miss tokens the target keeps and may
// propose tokens the target cut: the device's verdict and emitted token
// equal the CPU's, the logprob within 1e-6, top logprobs (every third row)
// the CPU's; both verdicts and residual draws occur.
// VerifiesWholeVocabularyRowsOnTheDevice: a row with no live logit after the
// mask is listed for the host. WholeVocabularySupportsStayOnTheDevice:
// drafts whose support is the whole vocabulary (3000 tokens, 4 rows) are
// verified on the device, equal to the CPU.
//
// EmittedTokensFollowTheTarget(OverTheWholeVocabulary): 2500 trials at one
// position (temperature, top-k, top-p over 20 tokens; or top-k off and
// top-p, through VocabDraw), the draft drawn from a q whose mode differs
// from the target's: the emitted token (the draft if accepted, else the
// residual draw) fits the target's processed distribution p (chi-square
// below its 0.999 quantile), the acceptance rate is within 5 sigma of
// sum min(p, q), and the same counts reject q (the test tells p from q).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/device/device_sampler.h"
#include "engine/sampling/speculative_verifier.h"
#include "gtest/gtest.h"
#include "kernels/cuda/runtime/device_buffer.h"
#include "tests/unit/engine/sampling/distribution_test_util.h"

namespace tandem::device {
namespace {

using sampling::DraftProbs;
using sampling::SampleResult;
using sampling::SamplingParams;
using sampling::SamplingRow;

// One position's data; SamplingRow views it.
struct Position {
  std::vector<float> logits;
  SamplingParams params;
  std::vector<int32_t> prompt, output, eos = {2};
  uint64_t seed = 0, stream = 0;
  int32_t draft = 0;
  DraftProbs q;

  SamplingRow View() const {
    return {.logits = logits.data(),
            .params = &params,
            .prompt_tokens = prompt,
            .output_tokens = output,
            .seed = seed,
            .stream = stream,
            .eos_token_ids = eos,
            .draft_token = draft,
            .draft_probs = &q};
  }
};

struct DeviceRun {
  std::vector<SampleResult> results;
  std::vector<int32_t> host_rows;
};

// The positions through DeviceSampler, in calls of at most `max_rows`.
DeviceRun VerifyOnDevice(const std::vector<Position>& positions, int32_t vocab,
                         int32_t max_rows) {
  absl::StatusOr<DeviceSampler> sampler = DeviceSampler::Create(max_rows, vocab, 1 << 14);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  absl::StatusOr<cuda::DeviceBuffer> logits =
      cuda::DeviceBuffer::Allocate(int64_t{max_rows} * vocab * 4, "test logits");
  EXPECT_TRUE(logits.ok()) << logits.status();
  DeviceRun run;
  run.results.resize(positions.size());
  for (size_t begin = 0; begin < positions.size(); begin += static_cast<size_t>(max_rows)) {
    const size_t end = std::min(positions.size(), begin + static_cast<size_t>(max_rows));
    std::vector<float> host;
    std::vector<SamplingRow> rows;
    std::vector<int64_t> logit_rows;
    for (size_t i = begin; i < end; ++i) {
      host.insert(host.end(), positions[i].logits.begin(), positions[i].logits.end());
      rows.push_back(positions[i].View());
      logit_rows.push_back(static_cast<int64_t>(i - begin));
    }
    EXPECT_TRUE(logits->Upload(host.data(), static_cast<int64_t>(host.size() * 4), 0, nullptr).ok());
    std::vector<int32_t> host_rows;
    const absl::Status s =
        sampler->Sample(logits->as<float>(), logit_rows, rows,
                        std::span(run.results).subspan(begin, end - begin), &host_rows, nullptr);
    EXPECT_TRUE(s.ok()) << s;
    for (int32_t h : host_rows) run.host_rows.push_back(static_cast<int32_t>(begin) + h);
  }
  return run;
}

SampleResult VerifyOnCpu(const Position& position, int32_t vocab) {
  sampling::SpeculativeVerifier verifier(vocab);
  SampleResult result;
  verifier.VerifyPosition(position.View(), &result);
  return result;
}

constexpr int32_t kVocab = 300;

// A q over `size` tokens around the draft (which is among them), with
// occasionally a duplicate entry (the later one counts, as on the CPU).
DraftProbs SampledQ(std::mt19937& rng, int32_t draft, int size) {
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  std::uniform_real_distribution<float> unit(0.05f, 1.0f);
  DraftProbs q;
  q.support_tokens.push_back(draft);
  while (static_cast<int>(q.support_tokens.size()) < size) q.support_tokens.push_back(id(rng));
  float sum = 0.0f;
  for (size_t j = 0; j < q.support_tokens.size(); ++j) {
    q.support_probs.push_back(unit(rng));
    sum += q.support_probs.back();
  }
  for (float& x : q.support_probs) x /= sum;
  q.prob = q.support_probs[0];
  return q;
}

Position RandomPosition(std::mt19937& rng, int i) {
  std::normal_distribution<float> logit(0.0f, 2.0f);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  Position pos;
  for (int32_t v = 0; v < kVocab; ++v) pos.logits.push_back(logit(rng));
  // A few dominant tokens, so that drafts are often accepted.
  for (int32_t t : {30, 31, 32}) pos.logits[t] += 6.0f;
  SamplingParams& p = pos.params;
  p.temperature = i % 4 == 0 ? 0.0f : 0.7f + 0.1f * static_cast<float>(i % 5);
  // The candidate kernel's rows (7, 50) and VocabDraw's (off, past 2048).
  p.top_k = std::vector<int32_t>{7, 50, 0, 2500}[i % 4];
  p.top_p = i % 3 == 0 ? 0.9f : 1.0f;
  p.min_p = i % 5 == 1 ? 0.02f : 0.0f;
  p.repetition_penalty = i % 3 == 1 ? 1.2f : 1.0f;
  p.min_tokens = i % 7 == 3 ? 40 : 0;
  p.stop_token_ids = {30};
  p.logprobs = i % 3 == 2 ? 4 : 0;
  pos.prompt = {5, 31, 8};
  for (int k = 0; k < i % 6; ++k) pos.output.push_back(id(rng));
  pos.seed = rng();
  pos.stream = i % 2;
  // The draft: a likely token, or anything; q one-hot or sampled.
  pos.draft = i % 3 == 2 ? id(rng) : 30 + i % 3;
  if (i % 2 == 1) pos.q = SampledQ(rng, pos.draft, 3 + i % 37);
  if (i % 11 == 5 && !pos.q.support_tokens.empty()) {
    pos.q.support_tokens.push_back(pos.q.support_tokens.back());  // a duplicate: last wins
    pos.q.support_probs.push_back(0.5f);
  }
  return pos;
}

TEST(DeviceVerifyTest, EqualsTheCpuVerifier) {
  std::mt19937 rng(17);
  std::vector<Position> positions;
  for (int i = 0; i < 96; ++i) positions.push_back(RandomPosition(rng, i));
  const DeviceRun device = VerifyOnDevice(positions, kVocab, 40);
  EXPECT_TRUE(device.host_rows.empty());
  int accepted = 0;
  int corrected = 0;
  for (size_t i = 0; i < positions.size(); ++i) {
    const SamplingParams& p = positions[i].params;
    SCOPED_TRACE(::testing::Message() << "position " << i << " temperature " << p.temperature
                                      << " top_k " << p.top_k << " draft " << positions[i].draft
                                      << " support " << positions[i].q.support_tokens.size());
    const SampleResult cpu = VerifyOnCpu(positions[i], kVocab);
    EXPECT_EQ(device.results[i].draft_accepted, cpu.draft_accepted);
    EXPECT_EQ(device.results[i].token, cpu.token);
    EXPECT_NEAR(device.results[i].logprob, cpu.logprob, 1e-6);
    ASSERT_EQ(device.results[i].top_logprobs.size(), cpu.top_logprobs.size());
    for (size_t j = 0; j < cpu.top_logprobs.size(); ++j) {
      EXPECT_EQ(device.results[i].top_logprobs[j].token, cpu.top_logprobs[j].token);
      EXPECT_NEAR(device.results[i].top_logprobs[j].logprob, cpu.top_logprobs[j].logprob, 1e-6);
    }
    accepted += cpu.draft_accepted;
    corrected += !cpu.draft_accepted && p.temperature > 0.0f;
  }
  EXPECT_GT(accepted, 20);
  EXPECT_GT(corrected, 10);
}

// Whole-vocabulary rows (top-k off) with drafts are verified on the device;
// a row with no live logit after the min-tokens mask goes to the host.
TEST(DeviceVerifyTest, VerifiesWholeVocabularyRowsOnTheDevice) {
  std::mt19937 rng(4);
  std::vector<Position> positions = {RandomPosition(rng, 1), RandomPosition(rng, 3),
                                     RandomPosition(rng, 0), RandomPosition(rng, 3)};
  positions[1].params.top_k = 0;  // VocabDraw's row
  positions[2].params.top_k = 0;  // greedy: the argmax, on the device
  positions[3].logits.assign(kVocab, -std::numeric_limits<float>::infinity());
  positions[3].logits[30] = 1.0f;  // the stop id, masked under min_tokens
  positions[3].params.min_tokens = 100;
  positions[3].params.top_k = 0;
  const DeviceRun device = VerifyOnDevice(positions, kVocab, 4);
  EXPECT_EQ(device.host_rows, std::vector<int32_t>{3});
  EXPECT_EQ(device.results[3].token, -1);
  for (size_t i : {0u, 1u, 2u}) {
    const SampleResult cpu = VerifyOnCpu(positions[i], kVocab);
    EXPECT_EQ(device.results[i].token, cpu.token) << i;
    EXPECT_EQ(device.results[i].draft_accepted, cpu.draft_accepted) << i;
  }
}

// Drafts sampled with top-k off carry the whole vocabulary as support: every
// row of a full call keeps its verification on the device, equal to the CPU.
TEST(DeviceVerifyTest, WholeVocabularySupportsStayOnTheDevice) {
  constexpr int32_t kLargeVocab = 3000;
  constexpr int32_t kRows = 4;
  std::mt19937 rng(12);
  std::normal_distribution<float> logit(0.0f, 1.0f);
  std::vector<Position> positions(kRows);
  for (int32_t i = 0; i < kRows; ++i) {
    Position& pos = positions[static_cast<size_t>(i)];
    for (int32_t v = 0; v < kLargeVocab; ++v) pos.logits.push_back(logit(rng));
    pos.params.temperature = 0.9f;
    pos.params.top_k = i % 2 == 0 ? 0 : 50;  // VocabDraw's row, the candidate kernel's
    pos.seed = rng();
    pos.draft = 17 * (i + 1);
    // q: a softmax of other logits over the whole vocabulary.
    std::vector<float> q(kLargeVocab);
    float sum = 0.0f;
    for (float& x : q) sum += x = std::exp(logit(rng));
    for (int32_t t = 0; t < kLargeVocab; ++t) {
      pos.q.support_tokens.push_back(t);
      pos.q.support_probs.push_back(q[static_cast<size_t>(t)] / sum);
    }
    pos.q.prob = pos.q.support_probs[static_cast<size_t>(pos.draft)];
  }
  const DeviceRun device = VerifyOnDevice(positions, kLargeVocab, kRows);
  EXPECT_TRUE(device.host_rows.empty());
  for (int32_t i = 0; i < kRows; ++i) {
    const SampleResult cpu = VerifyOnCpu(positions[static_cast<size_t>(i)], kLargeVocab);
    EXPECT_EQ(device.results[static_cast<size_t>(i)].token, cpu.token) << i;
    EXPECT_EQ(device.results[static_cast<size_t>(i)].draft_accepted, cpu.draft_accepted) << i;
  }
}

// 2500 verifications at one position of `target`'s distribution p with
// drafts drawn from q: the emitted tokens fit p, at least `min_cut` tokens q
// proposes are cut by the target, the acceptance rate is Σ min(p, q).
void ExpectEmittedTokensFollow(const sampling::fit::Expected& kTarget, int min_cut) {
  constexpr int kTrials = 2500;
  const std::vector<float>& logits = sampling::fit::FitLogits();
  const int32_t vocab = static_cast<int32_t>(logits.size());
  const std::vector<double> p = sampling::fit::ExpectedProbs(logits, kTarget);
  // q: its mode is a token the target ranks low, and it proposes tokens the
  // target's top-k cuts.
  std::vector<double> q(vocab, 0.0);
  for (int32_t t = 0; t < vocab; ++t) q[t] = 1.0 + (t % 3 == 0 ? 6.0 : 0.0) + (t == 11 ? 9.0 : 0.0);
  double q_sum = 0.0;
  for (double x : q) q_sum += x;
  for (double& x : q) x /= q_sum;

  SamplingParams params;
  params.temperature = kTarget.temperature;
  params.top_k = kTarget.top_k;
  params.top_p = static_cast<float>(kTarget.top_p);
  std::mt19937_64 gen(99);
  std::discrete_distribution<int32_t> pick(q.begin(), q.end());
  std::vector<Position> positions(kTrials);
  for (int trial = 0; trial < kTrials; ++trial) {
    Position& pos = positions[static_cast<size_t>(trial)];
    pos.logits = logits;
    pos.params = params;
    pos.output = {1, 2, 3};
    pos.eos = {};
    pos.seed = static_cast<uint64_t>(trial);
    pos.draft = pick(gen);
    for (int32_t t = 0; t < vocab; ++t) {
      pos.q.support_tokens.push_back(t);
      pos.q.support_probs.push_back(static_cast<float>(q[t]));
    }
    pos.q.prob = static_cast<float>(q[pos.draft]);
  }
  const DeviceRun device = VerifyOnDevice(positions, vocab, 64);
  ASSERT_TRUE(device.host_rows.empty());
  std::vector<int> counts(vocab, 0);
  int accepted = 0;
  for (const SampleResult& r : device.results) {
    ASSERT_GE(r.token, 0);
    ++counts[r.token];
    accepted += r.draft_accepted;
  }
  const int excluded = sampling::fit::ExpectFit(counts, p);
  EXPECT_GE(excluded, min_cut) << "the target must cut tokens q proposes";
  double rate = 0.0;
  for (int32_t t = 0; t < vocab; ++t) rate += std::min(p[t], q[t]);
  const double sigma = std::sqrt(rate * (1.0 - rate) / kTrials);
  EXPECT_NEAR(accepted / double{kTrials}, rate, 5 * sigma);
  // Power: the draws are far from q itself.
  const auto [stat_q, df_q] = sampling::fit::ChiSquare(counts, q);
  EXPECT_GT(stat_q, 10 * sampling::fit::Chi2Quantile999(df_q));
}

TEST(DeviceVerifyTest, EmittedTokensFollowTheTarget) {
  ExpectEmittedTokensFollow({.temperature = 1.2f, .top_k = 12, .top_p = 0.92}, 6);
}

// Top-k off: VocabDraw's verification over the whole row.
TEST(DeviceVerifyTest, EmittedTokensFollowTheTargetOverTheWholeVocabulary) {
  ExpectEmittedTokensFollow({.temperature = 0.9f, .top_p = 0.85}, 1);
}

}  // namespace
}  // namespace tandem::device
