// Goodness-of-fit tests of speculative verification: whatever the draft
// proposes, the tokens the verifier emits follow the target's processed
// distribution alone. Each trial verifies g = 2 drafts at its own seed, the
// drafts drawn from the draft distribution q by the test's own generator;
// the target's logits differ per position. Over the trials:
//   the first emitted token (d_1 if accepted, else the correction) ~ p_1;
//   given d_1 accepted, the second (d_2, or the correction) ~ p_2;
//   given both accepted, the bonus ~ p_3;
//   d_1 is accepted with probability sum_x min(p_1(x), q_1(x)).
// p_i comes from the independent reference pipeline (distribution_test_util.h)
// with temperature, top-k and top-p; q is one-hot at a token that is not the
// target's mode, one-hot at a token the target's top-k removes, or a sampled
// distribution over a support whose mode differs from the target's. Each
// chi-square statistic must stay below its 0.999 quantile.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling/speculative_verifier.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/sampling/distribution_test_util.h"

namespace tandem::sampling {
namespace {

using fit::ChiSquare;
using fit::Chi2Quantile999;
using fit::Expected;

constexpr int32_t kVocab = 20;
constexpr int kTrials = 200000;
constexpr int kDrafts = 2;

const std::vector<float>& BaseLogits() {
  static const std::vector<float> logits = {
      1.20f, -0.40f, 2.10f, 0.30f,  0.95f, -1.60f, 1.75f, 0.00f, -0.80f, 1.50f,
      0.60f, -2.00f, 0.10f, 2.40f, -0.20f, 0.80f,  1.10f, -1.10f, 0.45f, -0.60f};
  return logits;
}

// BaseLogits rotated left by `shift`: a different distribution per position.
std::vector<float> Rotated(int shift) {
  std::vector<float> logits = BaseLogits();
  std::rotate(logits.begin(), logits.begin() + shift, logits.end());
  return logits;
}

// The target: temperature, top-k and top-p, identical in the engine params
// and the reference.
constexpr Expected kTarget = {.temperature = 1.2f, .top_k = 12, .top_p = 0.92};

SamplingParams TargetParams() {
  SamplingParams p;
  p.temperature = kTarget.temperature;
  p.top_k = kTarget.top_k;
  p.top_p = static_cast<float>(kTarget.top_p);
  return p;
}

// Target logits of the three positions (before d_1, d_2, after d_2).
const std::vector<float>& TargetRow(int i) {
  static const std::vector<std::vector<float>> rows = {Rotated(0), Rotated(7), Rotated(13)};
  return rows[static_cast<size_t>(i)];
}

std::vector<double> P(int i) { return fit::ExpectedProbs(TargetRow(i), kTarget); }

// Index of the k-th most probable token (k = 0: the mode).
int32_t Ranked(const std::vector<double>& p, int k) {
  std::vector<int32_t> order(p.size());
  for (size_t i = 0; i < p.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  return order[static_cast<size_t>(k)];
}

// How the test's draft proposes at position i: a one-hot token, or a
// distribution it samples from.
struct DraftModel {
  std::vector<int32_t> one_hot;        // per position, when non-empty
  std::vector<std::vector<double>> q;  // per position, otherwise
};

struct Tally {
  std::vector<int> first = std::vector<int>(kVocab, 0);
  std::vector<int> second = std::vector<int>(kVocab, 0);
  std::vector<int> bonus = std::vector<int>(kVocab, 0);
  int first_accepted = 0;
};

Tally RunTrials(const DraftModel& draft) {
  SpeculativeVerifier verifier(kVocab);
  const SamplingParams params = TargetParams();
  std::vector<float> logits;
  for (int i = 0; i <= kDrafts; ++i) {
    logits.insert(logits.end(), TargetRow(i).begin(), TargetRow(i).end());
  }
  const std::vector<int32_t> history = {4, 4, 9, 1, 0};  // only its length matters
  std::mt19937_64 gen(424242);
  Tally tally;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<int32_t> drafts;
    std::vector<DraftProbs> probs;
    for (int i = 0; i < kDrafts; ++i) {
      if (!draft.one_hot.empty()) {
        drafts.push_back(draft.one_hot[static_cast<size_t>(i)]);
        probs.push_back({});
        continue;
      }
      const std::vector<double>& q = draft.q[static_cast<size_t>(i)];
      std::discrete_distribution<int32_t> pick(q.begin(), q.end());
      const int32_t d = pick(gen);
      DraftProbs dp;
      for (int32_t t = 0; t < kVocab; ++t) {
        if (q[t] <= 0.0) continue;
        dp.support_tokens.push_back(t);
        dp.support_probs.push_back(static_cast<float>(q[t]));
      }
      dp.prob = static_cast<float>(q[d]);
      drafts.push_back(d);
      probs.push_back(std::move(dp));
    }
    const VerifyRow row{.target = {.logits = logits.data(),
                                   .params = &params,
                                   .output_tokens = history,
                                   .seed = static_cast<uint64_t>(trial),
                                   .stream = 3},
                        .draft_tokens = drafts,
                        .draft_probs = probs};
    VerifyResult result;
    verifier.VerifyBatch(std::span<const VerifyRow>(&row, 1), std::span<VerifyResult>(&result, 1),
                         nullptr);
    const std::vector<SampleResult>& a = result.accepted;
    ++tally.first[(a.empty() ? result.next : a[0]).token];
    if (a.empty()) continue;
    ++tally.first_accepted;
    ++tally.second[(a.size() >= 2 ? a[1] : result.next).token];
    if (a.size() == 2) ++tally.bonus[result.next.token];
  }
  return tally;
}

void ExpectFit(const std::vector<int>& counts, const std::vector<double>& p,
               const std::string& what) {
  for (int32_t t = 0; t < kVocab; ++t) {
    if (p[t] == 0.0) {
      EXPECT_EQ(counts[t], 0) << what << ": token " << t << " has p = 0";
    }
  }
  const auto [stat, df] = ChiSquare(counts, p);
  EXPECT_LT(stat, Chi2Quantile999(df)) << what << ": df " << df;
  std::printf("%s: chi2 %.1f (df %d, 0.999 quantile %.1f)\n", what.c_str(), stat, df,
              Chi2Quantile999(df));
}

// Acceptance of d_1 within 5 standard deviations of sum_x min(p, q).
void ExpectAcceptanceRate(const Tally& tally, const std::vector<double>& p,
                          const std::vector<double>& q) {
  double rate = 0.0;
  for (int32_t t = 0; t < kVocab; ++t) rate += std::min(p[t], q[t]);
  const double sigma = std::sqrt(rate * (1.0 - rate) / kTrials);
  EXPECT_NEAR(tally.first_accepted / double{kTrials}, rate, 5 * sigma + 1e-12);
}

void CheckAll(const DraftModel& draft, const std::vector<double>& q1) {
  const Tally tally = RunTrials(draft);
  ASSERT_GT(tally.first_accepted, 10000) << "too few acceptances to test the later tokens";
  ExpectFit(tally.first, P(0), "first emitted token");
  ExpectFit(tally.second, P(1), "second emitted token");
  int num_bonus = 0;
  for (int c : tally.bonus) num_bonus += c;
  if (num_bonus > 5000) ExpectFit(tally.bonus, P(2), "bonus token");
  ExpectAcceptanceRate(tally, P(0), q1);
}

std::vector<double> OneHot(int32_t token) {
  std::vector<double> q(kVocab, 0.0);
  q[static_cast<size_t>(token)] = 1.0;
  return q;
}

// A deterministic draft (greedy or n-gram) proposing the target's
// second-ranked token at each position.
TEST(SpeculativeDistributionTest, OneHotDraftOffTheTargetMode) {
  DraftModel draft;
  draft.one_hot = {Ranked(P(0), 1), Ranked(P(1), 1)};
  CheckAll(draft, OneHot(draft.one_hot[0]));
}

// The draft's first token is one the target's top-k removes (p = 0): it is
// never accepted and the correction alone must carry p_1. The second is the
// target's mode (so the bonus is reached).
TEST(SpeculativeDistributionTest, OneHotDraftOutsideTheTargetSupport) {
  DraftModel draft;
  draft.one_hot = {Ranked(P(0), kVocab - 1), Ranked(P(1), 0)};
  ASSERT_EQ(P(0)[static_cast<size_t>(draft.one_hot[0])], 0.0);
  const Tally tally = RunTrials(draft);
  EXPECT_EQ(tally.first_accepted, 0);
  ExpectFit(tally.first, P(0), "first emitted token");
}

// A sampling draft whose distribution (another model's: different logits,
// its own temperature and top-k, so a smaller support) has a different mode.
TEST(SpeculativeDistributionTest, SampledDraftWithSupport) {
  DraftModel draft;
  for (int i = 0; i < kDrafts; ++i) {
    std::vector<float> logits = Rotated(3 + 5 * i);
    for (float& l : logits) l *= 0.8f;
    draft.q.push_back(fit::ExpectedProbs(logits, {.temperature = 1.0f, .top_k = 9}));
    ASSERT_NE(Ranked(draft.q.back(), 0), Ranked(P(i), 0)) << "position " << i;
  }
  CheckAll(draft, draft.q[0]);
}

// The same statistics have power: the first tokens of the one-hot run do
// not fit a nearby wrong target (temperature 1.45 instead of 1.2), nor the
// draft-biased mixture a verifier that always accepted would produce.
TEST(SpeculativeDistributionTest, DetectsAWrongDistribution) {
  DraftModel draft;
  draft.one_hot = {Ranked(P(0), 1), Ranked(P(1), 1)};
  const Tally tally = RunTrials(draft);
  Expected warmer = kTarget;
  warmer.temperature = 1.45f;
  const auto [stat, df] = ChiSquare(tally.first, fit::ExpectedProbs(TargetRow(0), warmer));
  EXPECT_GT(stat, Chi2Quantile999(df));
  std::vector<double> biased = P(0);
  for (double& x : biased) x *= 0.9;
  biased[static_cast<size_t>(draft.one_hot[0])] += 0.1;
  const auto [stat2, df2] = ChiSquare(tally.first, biased);
  EXPECT_GT(stat2, Chi2Quantile999(df2));
}

}  // namespace
}  // namespace tandem::sampling
