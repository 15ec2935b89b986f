#include "engine/sampling/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/sampling/candidate_list.h"
#include "gtest/gtest.h"

namespace tandem::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The surviving tokens, in id order.
std::vector<int32_t> Tokens(const CandidateList& c) {
  std::vector<int32_t> out;
  for (const Candidate& x : c.items()) out.push_back(x.token);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(LogitsProcessorTest, RepetitionPenaltyDividesPositiveMultipliesNegativeOnce) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  std::vector<uint8_t> seen(logits.size(), 0);
  const std::vector<int32_t> prompt = {0, 4, 0};
  const std::vector<int32_t> output = {1, 1, 0};
  ApplyRepetitionPenalty(logits, prompt, output, 2.0f, seen);
  // 0: 2/2 once (not 2/2/2/2); 1: -1*2 once; 4: 0 is not > 0 → 0*2 = 0.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f, 0.0f}));
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](uint8_t s) { return s == 0; }));

  // A penalty < 1 rewards repetition the same way.
  std::vector<float> l2 = {2.0f, -1.0f};
  ApplyRepetitionPenalty(l2, {}, std::vector<int32_t>{0, 1}, 0.5f, seen);
  EXPECT_EQ(l2, (std::vector<float>{4.0f, -0.5f}));
}

TEST(LogitsProcessorTest, FrequencyAndPresencePenalties) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<int32_t> counts(logits.size(), 0);
  const std::vector<int32_t> output = {1, 2, 1, 1};
  ApplyFrequencyPresencePenalties(logits, output, /*frequency=*/0.25f, /*presence=*/0.5f, counts);
  // 1: 1 - (0.25*3 + 0.5) = -0.25; 2: 1 - (0.25 + 0.5) = 0.25.
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], -0.25f);
  EXPECT_FLOAT_EQ(logits[2], 0.25f);
  EXPECT_FLOAT_EQ(logits[3], 1.0f);
  EXPECT_TRUE(std::all_of(counts.begin(), counts.end(), [](int32_t c) { return c == 0; }));

  // Negative penalties encourage repetition.
  std::vector<float> l2 = {0.0f, 0.0f};
  ApplyFrequencyPresencePenalties(l2, std::vector<int32_t>{0, 0}, -1.0f, -2.0f, counts);
  EXPECT_FLOAT_EQ(l2[0], 4.0f);
  EXPECT_FLOAT_EQ(l2[1], 0.0f);
}

TEST(LogitsProcessorTest, MaskTemperatureArgmax) {
  std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  EXPECT_EQ(Argmax(logits), 1);  // tie → lowest id
  MaskTokens(logits, std::vector<int32_t>{1});
  EXPECT_EQ(logits[1], -kInf);
  EXPECT_EQ(Argmax(logits), 2);
  ApplyTemperature(logits, 0.5f);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -kInf, 6.0f, -4.0f}));
  std::vector<float> dead = {-kInf, std::nanf(""), -kInf};
  EXPECT_EQ(Argmax(dead), -1);
  std::vector<float> with_nan = {std::nanf(""), 0.5f};
  EXPECT_EQ(Argmax(with_nan), 1);
}

TEST(CandidateListTest, ResetSkipsMaskedAndNan) {
  CandidateList c;
  const std::vector<float> logits = {0.0f, -kInf, std::nanf(""), kInf, -1.0f};
  c.Reset(logits);
  ASSERT_EQ(Tokens(c), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(c[1].value, std::numeric_limits<float>::max());
}

TEST(CandidateListTest, SortPrefixMatchesFullSortOnLargeRandomRows) {
  std::mt19937 gen(123);
  std::uniform_int_distribution<int> coarse(-50, 50);  // many ties
  std::vector<float> logits(5000);
  for (float& l : logits) l = static_cast<float>(coarse(gen)) * 0.1f;
  std::vector<Candidate> reference;
  for (size_t i = 0; i < logits.size(); ++i) reference.push_back({int32_t(i), logits[i]});
  std::sort(reference.begin(), reference.end(), CandidateBefore);

  CandidateList c;
  c.Reset(logits);
  for (size_t n : {1, 10, 100, 5000}) {
    c.SortPrefix(n);
    ASSERT_GE(c.num_sorted(), n);
    for (size_t i = 0; i < c.num_sorted(); ++i) {
      ASSERT_EQ(c[i].token, reference[i].token) << "n=" << n << " i=" << i;
    }
  }
}

// FindMassCrossing against a plain walk over a fully sorted copy, on lists
// long enough to go through the halving phase, with many tied weights.
TEST(CandidateListTest, FindMassCrossingMatchesSortedWalk) {
  std::mt19937 gen(99);
  std::uniform_int_distribution<int> coarse(0, 40);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(3000 + 500 * trial);
    for (float& l : logits) l = static_cast<float>(coarse(gen)) * 0.05f;
    CandidateList base;
    base.Reset(logits);
    const double total = base.ToWeights();
    std::vector<Candidate> sorted(base.items().begin(), base.items().end());
    std::sort(sorted.begin(), sorted.end(), CandidateBefore);
    for (double frac : {0.0, 0.01, 0.3, 0.77, 0.999}) {
      const double target = frac * total;
      for (MassCrossing mode : {MassCrossing::kReaches, MassCrossing::kExceeds}) {
        double mass = 0.0;
        size_t expected = sorted.size();
        for (size_t i = 0; i < sorted.size(); ++i) {
          mass += sorted[i].value;
          if (mode == MassCrossing::kReaches ? mass >= target : mass > target) {
            expected = i;
            break;
          }
        }
        CandidateList c = base;
        const size_t got = c.FindMassCrossing(target, mode);
        ASSERT_EQ(got, expected) << "trial " << trial << " frac " << frac;
        EXPECT_EQ(c[got].token, sorted[expected].token);
        // The head [0, got] is the canonical first got+1 as a set.
        c.KeepHead(got + 1);
        std::vector<int32_t> want;
        for (size_t i = 0; i <= expected; ++i) want.push_back(sorted[i].token);
        std::sort(want.begin(), want.end());
        ASSERT_EQ(Tokens(c), want);
      }
    }
  }
}

// Indices of the logits that are not -inf.
std::vector<int32_t> Live(const std::vector<float>& logits) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != -kInf) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

TEST(LogitsProcessorTest, TopKKeepsTiesAtTheBoundary) {
  std::vector<float> scratch;
  std::vector<float> logits = {0.1f, 0.9f, 0.5f, 0.5f, 0.3f, 0.7f, -kInf, std::nanf("")};
  ApplyTopK(3, logits, &scratch);  // 0.9, 0.7, 0.5 (×2: tie at the 3rd value)
  EXPECT_EQ(Live(logits), (std::vector<int32_t>{1, 2, 3, 5, 7}));  // NaN is left alone
  EXPECT_EQ(logits[1], 0.9f);
  const std::vector<float> before = logits;
  ApplyTopK(0, logits, &scratch);
  ApplyTopK(-1, logits, &scratch);
  EXPECT_EQ(Live(logits), Live(before));
  // Fewer live logits than k: nothing to cut.
  std::vector<float> few = {1.0f, -kInf, -kInf, 2.0f, -kInf, -kInf, -kInf, -kInf, -kInf};
  ApplyTopK(3, few, &scratch);
  EXPECT_EQ(Live(few), (std::vector<int32_t>{0, 3}));
}

// Both selection paths (heap for small k, nth_element for large k) against a
// full sort, on coarse values so ties at the boundary are common.
TEST(LogitsProcessorTest, TopKOnLargeVocabularyEqualsSortedSelection) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> coarse(-300, 300);
  std::vector<float> scratch;
  for (int32_t k : {1, 8, 50, 1000, 40000}) {
    std::vector<float> logits(100000);
    for (float& l : logits) l = static_cast<float>(coarse(gen)) * 0.01f;
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float kth = sorted[k - 1];
    std::vector<int32_t> expected;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (logits[i] >= kth) expected.push_back(static_cast<int32_t>(i));
    }
    ApplyTopK(k, logits, &scratch);
    EXPECT_EQ(Live(logits), expected) << "k=" << k;
    EXPECT_GE(expected.size(), static_cast<size_t>(k));
  }
}

TEST(LogitsProcessorTest, ToWeightsTopPMinP) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (logits are logs of them).
  const std::vector<float> logits = {std::log(0.125f), std::log(0.5f), std::log(0.125f),
                                     std::log(0.25f)};
  CandidateList c;
  c.Reset(logits);
  const double total = c.ToWeights();
  EXPECT_NEAR(total, 2.0, 1e-6);  // weights relative to the best: 1, .5, .25, .25
  CandidateList p = c;
  ApplyTopP(0.7f, &p);  // 0.5 < 0.7, 0.75 >= 0.7 → tokens 1, 3
  EXPECT_EQ(Tokens(p), (std::vector<int32_t>{1, 3}));
  p = c;
  ApplyTopP(0.45f, &p);  // the best alone (0.5) reaches 0.45
  EXPECT_EQ(Tokens(p), (std::vector<int32_t>{1}));
  p = c;
  ApplyTopP(0.8f, &p);  // 0.75 < 0.8 → the first 0.125 by id (0) joins
  EXPECT_EQ(Tokens(p), (std::vector<int32_t>{0, 1, 3}));
  p = c;
  ApplyMinP(0.45f, &p);  // keep probability >= 0.225
  EXPECT_EQ(Tokens(p), (std::vector<int32_t>{1, 3}));
  p = c;
  ApplyMinP(0.2f, &p);
  EXPECT_EQ(p.size(), 4u);
}

TEST(LogitsProcessorTest, DrawInverseCdfWalksCanonicalOrder) {
  // Weights 1, .5, .25, .25 over tokens 1, 3, 0, 2: CDF cut points at total 2.
  const std::vector<float> logits = {std::log(0.125f), std::log(0.5f), std::log(0.125f),
                                     std::log(0.25f)};
  CandidateList c;
  auto draw = [&](double u) {
    c.Reset(logits);
    c.ToWeights();
    return DrawInverseCdf(u, &c);
  };
  EXPECT_EQ(draw(0.0), 1);
  EXPECT_EQ(draw(0.49), 1);
  EXPECT_EQ(draw(0.51), 3);
  EXPECT_EQ(draw(0.74), 3);
  EXPECT_EQ(draw(0.76), 0);
  EXPECT_EQ(draw(0.86), 0);
  EXPECT_EQ(draw(0.9), 2);
  EXPECT_EQ(draw(std::nextafter(1.0, 0.0)), 2);
}

}  // namespace
}  // namespace tandem::sampling
