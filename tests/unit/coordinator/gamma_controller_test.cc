// GammaController: the expected-tokens formula, the online cost fit, and
// the choice: deep speculation when steps are latency-bound, none when
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

TEST(GammaControllerTest, FitsTheStepCost) {
  GammaController c;
  for (int i = 0; i < 50; ++i) {
    const int64_t n = 1 + (i * 7) % 40;
    c.ObserveStep(n, 20.0 + 0.5 * static_cast<double>(n));
  }
  EXPECT_NEAR(c.fixed_ms(), 20.0, 1e-6);
  EXPECT_NEAR(c.per_token_ms(), 0.5, 1e-9);
}

TEST(GammaControllerTest, LatencyBoundStepsSpeculateComputeBoundOnesDoNot) {
  GammaController latency_bound;  // a step costs 50 ms + 0.1 ms per token
  GammaController compute_bound;  // 1 ms + 5 ms per token
  for (int i = 0; i < 40; ++i) {
    const int64_t n = 1 + i % 20;
    latency_bound.ObserveStep(n, 50.0 + 0.1 * static_cast<double>(n));
    compute_bound.ObserveStep(n, 1.0 + 5.0 * static_cast<double>(n));
  }
  EXPECT_GE(latency_bound.Choose(0.8, 1, 1), 4);
  EXPECT_EQ(compute_bound.Choose(0.8, 16, 16), 0);
  // A single compute-bound stream gains little but may still speculate
  // shallowly; never deeper than a latency-bound one.
  EXPECT_LE(compute_bound.Choose(0.8, 1, 1), latency_bound.Choose(0.8, 1, 1));
  // Rarely accepted drafts never pay, even when speculation is cheap.
  EXPECT_EQ(latency_bound.Choose(0.02, 1, 1), 0);
  // A larger batch never asks for a deeper round.
  EXPECT_LE(latency_bound.Choose(0.8, 256, 256), latency_bound.Choose(0.8, 1, 1));
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
  EXPECT_GE(cheap.Choose(0.7, 1, 1), 2);
  EXPECT_EQ(costly.Choose(0.7, 1, 1), 0);
}

TEST(GammaControllerTest, AcceptanceMovesTowardsWhatIsObserved) {
  GammaController c;
  double alpha = c.prior_acceptance();
  for (int i = 0; i < 20; ++i) alpha = c.UpdateAcceptance(alpha, 0, 4);
  EXPECT_LT(alpha, 0.01);
  for (int i = 0; i < 20; ++i) alpha = c.UpdateAcceptance(alpha, 4, 4);
  EXPECT_GT(alpha, 0.99);
  EXPECT_DOUBLE_EQ(c.UpdateAcceptance(0.3, 0, 0), 0.3);
}

TEST(GammaControllerTest, NewSequencesStartFromWhatTheDraftAchieved) {
  GammaController c;
  EXPECT_DOUBLE_EQ(c.prior_acceptance(), GammaControllerConfig{}.prior_acceptance);
  for (int i = 0; i < 200; ++i) c.UpdateAcceptance(0.5, 0, 4);  // drafts always rejected
  EXPECT_LT(c.prior_acceptance(), 0.01);
}

}  // namespace
}  // namespace tandem::coordinator
