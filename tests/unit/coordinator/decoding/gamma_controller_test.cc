// GammaController: the expected-tokens formulas, the online cost fit, the
// acceptance profiles, and the choice: deep speculation when steps are
// latency-bound or drafts are accepted all or nothing, none when
// compute-bound or when drafts are rarely accepted.
#include "coordinator/decoding/gamma_controller.h"

#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

TEST(GammaControllerTest, ExpectedTokensPerRound) {
  EXPECT_DOUBLE_EQ(ExpectedTokensPerRound(0.0, 5), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerRound(1.0, 5), 6.0);
  EXPECT_NEAR(ExpectedTokensPerRound(0.5, 2), 1.75, 1e-12);  // 1 + .5 + .25
  EXPECT_DOUBLE_EQ(ExpectedTokensPerRound(0.7, 0), 1.0);
}

// A profile with one rate everywhere reproduces the geometric formula.
AcceptanceProfile Rate(double alpha) { return AcceptanceProfile::Constant(alpha, 4.0); }

TEST(GammaControllerTest, ConstantProfileIsTheGeometricModel) {
  for (double alpha : {0.0, 0.3, 0.7, 1.0}) {
    for (int32_t g : {0, 1, 4, 20}) {
      EXPECT_NEAR(Rate(alpha).ExpectedTokens(g), ExpectedTokensPerRound(alpha, g), 1e-6)
          << alpha << " " << g;
    }
  }
}

TEST(GammaControllerTest, FitsTheStepCost) {
  GammaController c;
  for (int i = 0; i < 50; ++i) {
    const int64_t n = 1 + (i * 7) % 40;
    c.ObserveStep(n, 20.0 + 0.5 * static_cast<double>(n));
  }
  EXPECT_NEAR(c.fixed_ms(), 20.0, 1e-6);
  EXPECT_NEAR(c.per_token_ms(), 0.5, 1e-9);
}

// Steps of sizes seen are predicted by what they cost, not by the line: here
// steps past 4 tokens cost twice what the line through all sizes says, and
// the choice stops below them.
TEST(GammaControllerTest, MeasuredStepSizesOverrideTheLine) {
  GammaController c;
  auto cost = [](int64_t n) { return n <= 4 ? 3.0 + 0.5 * n : 2.0 * (3.0 + 0.5 * n); };
  for (int i = 0; i < 60; ++i) {
    const int64_t n = 1 + i % 9;
    c.ObserveStep(n, cost(n));
  }
  for (int64_t n = 1; n <= 9; ++n) EXPECT_NEAR(c.StepMs(n), cost(n), 1e-6) << n;
  EXPECT_NEAR(c.StepMs(30), c.fixed_ms() + 30 * c.per_token_ms(), 1e-9);  // never seen
  AcceptanceProfile certain = AcceptanceProfile::Constant(1.0, 4.0);
  EXPECT_EQ(c.Choose(certain, 1, 1), 3);  // 4-token steps; 5 cost twice as much
}

TEST(GammaControllerTest, LatencyBoundStepsSpeculateComputeBoundOnesDoNot) {
  GammaController latency_bound;  // a step costs 50 ms + 0.1 ms per token
  GammaController compute_bound;  // 1 ms + 5 ms per token
  for (int i = 0; i < 40; ++i) {
    const int64_t n = 1 + i % 20;
    latency_bound.ObserveStep(n, 50.0 + 0.1 * static_cast<double>(n));
    compute_bound.ObserveStep(n, 1.0 + 5.0 * static_cast<double>(n));
  }
  EXPECT_GE(latency_bound.Choose(Rate(0.8), 1, 1), 4);
  EXPECT_EQ(compute_bound.Choose(Rate(0.8), 16, 16), 0);
  // A single compute-bound stream gains little but may still speculate
  // shallowly; never deeper than a latency-bound one.
  EXPECT_LE(compute_bound.Choose(Rate(0.8), 1, 1), latency_bound.Choose(Rate(0.8), 1, 1));
  // Rarely accepted drafts never pay, even when speculation is cheap.
  EXPECT_EQ(latency_bound.Choose(Rate(0.02), 1, 1), 0);
  // A larger batch never asks for a deeper round.
  EXPECT_LE(latency_bound.Choose(Rate(0.8), 256, 256), latency_bound.Choose(Rate(0.8), 1, 1));
}

TEST(GammaControllerTest, ExpensiveDraftsSpeculateLessOrNotAtAll) {
  GammaController cheap, costly;
  for (int i = 0; i < 40; ++i) {
    const int64_t n = 1 + i % 20;
    cheap.ObserveStep(n, 20.0 + 0.5 * static_cast<double>(n));
    costly.ObserveStep(n, 20.0 + 0.5 * static_cast<double>(n));
    cheap.ObserveDraft(4, 0.4);     // 0.1 ms per position (n-gram)
    costly.ObserveDraft(4, 80.0);   // a draft forward as slow as the target's step
  }
  EXPECT_NEAR(costly.draft_ms_per_position(), 20.0, 1e-6);
  EXPECT_GE(cheap.Choose(Rate(0.7), 1, 1), 2);
  EXPECT_EQ(costly.Choose(Rate(0.7), 1, 1), 0);
}

TEST(GammaControllerTest, AcceptanceMovesTowardsWhatIsObserved) {
  GammaController c;
  AcceptanceProfile p = c.NewProfile();
  EXPECT_NEAR(p.Rate(1), GammaControllerConfig{}.prior_acceptance, 1e-6);
  for (int i = 0; i < 30; ++i) c.UpdateAcceptance(p, 0, 4);
  EXPECT_LT(p.Rate(1), 0.02);
  EXPECT_LT(p.ExpectedTokens(8), 1.03);
  for (int i = 0; i < 30; ++i) c.UpdateAcceptance(p, 4, 4);
  EXPECT_GT(p.Rate(1), 0.97);
  EXPECT_GT(p.Rate(4), 0.97);
  const AcceptanceProfile before = p;
  c.UpdateAcceptance(p, 0, 0);  // nothing proposed: nothing learned
  EXPECT_EQ(p.tried, before.tried);
}

// Copying drafts: half the rounds accept all 8, the others none. The
// geometric model (one rate 0.5) expects under 2 tokens a round; the
// profile sees that a round past the first draft always goes through.
TEST(GammaControllerTest, AllOrNothingDraftsAreWorthDeepRounds) {
  GammaController c;
  AcceptanceProfile p = c.NewProfile();
  for (int i = 0; i < 40; ++i) c.UpdateAcceptance(p, i % 2 == 0 ? 8 : 0, 8);
  EXPECT_NEAR(p.Rate(1), 0.5, 0.1);
  EXPECT_GT(p.Rate(2), 0.8);
  EXPECT_GT(p.Rate(8), 0.8);
  EXPECT_GT(p.ExpectedTokens(8), 3.5);
  EXPECT_LT(ExpectedTokensPerRound(0.5, 8), 2.0);
  // Steps of 3 ms + 0.8 ms per token (a small model on a CPU).
  GammaController cost;
  for (int i = 0; i < 40; ++i) {
    const int64_t n = 1 + i % 9;
    cost.ObserveStep(n, 3.0 + 0.8 * static_cast<double>(n));
  }
  EXPECT_GE(cost.Choose(p, 1, 1), 6);
  EXPECT_LE(cost.Choose(Rate(0.5), 1, 1), 2);
}

TEST(GammaControllerTest, NewSequencesStartFromWhatTheDraftAchieved) {
  GammaController c;
  EXPECT_DOUBLE_EQ(c.prior_acceptance(), GammaControllerConfig{}.prior_acceptance);
  for (int i = 0; i < 200; ++i) {
    AcceptanceProfile p = c.NewProfile();
    c.UpdateAcceptance(p, 0, 4);  // drafts always rejected
  }
  EXPECT_LT(c.prior_acceptance(), 0.01);
  EXPECT_LT(c.NewProfile().Rate(1), 0.02);
}

}  // namespace
}  // namespace tandem::coordinator
