#include "engine/sampling/rng.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::sampling {
namespace {

TEST(RngTest, PureFunctionOfItsInputs) {
  EXPECT_EQ(UniformDraw(42, 3, 17), UniformDraw(42, 3, 17));
  // Each coordinate matters, and swapping roles gives a different value.
  EXPECT_NE(UniformDraw(42, 3, 17), UniformDraw(43, 3, 17));
  EXPECT_NE(UniformDraw(42, 3, 17), UniformDraw(42, 4, 17));
  EXPECT_NE(UniformDraw(42, 3, 17), UniformDraw(42, 3, 18));
  EXPECT_NE(UniformDraw(42, 3, 17), UniformDraw(42, 17, 3));
  static_assert(UniformDraw(1, 2, 3) >= 0.0 && UniformDraw(1, 2, 3) < 1.0);
}

TEST(RngTest, RangeAndResolution) {
  bool saw_low_bits = false;
  for (uint64_t step = 0; step < 10000; ++step) {
    const double u = UniformDraw(7, 0, step);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    // 53-bit resolution: u * 2^53 is an integer, and some draws use bits
    // beyond float's 24.
    const double scaled = u * 0x1.0p53;
    ASSERT_EQ(scaled, std::floor(scaled));
    if (std::fmod(u * 0x1.0p24, 1.0) != 0.0) saw_low_bits = true;
  }
  EXPECT_TRUE(saw_low_bits);
}

TEST(RngTest, DistinctStepsNeverCollideWithinAStream) {
  std::set<uint64_t> seen;
  for (uint64_t step = 0; step < 100000; ++step) seen.insert(RandomBits(5, 9, step));
  EXPECT_EQ(seen.size(), 100000u);
}

// Chi-square uniformity over 100 bins, across seeds, streams and steps, and
// the lag-1 serial pairs of one stream on a 10x10 grid (correlated neighbours
// would fail it). 0.999 quantiles: df 99 → 148.23.
TEST(RngTest, UniformAndSeriallyIndependent) {
  constexpr int kBins = 100;
  constexpr int kDraws = 200000;
  std::vector<int> counts(kBins, 0);
  std::vector<int> pairs(kBins, 0);
  int i = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    for (uint64_t stream = 0; stream < 50; ++stream) {
      double prev = UniformDraw(seed, stream, 0);
      for (uint64_t step = 1; step <= 1000; ++step, ++i) {
        const double u = UniformDraw(seed, stream, step);
        ++counts[static_cast<int>(u * kBins)];
        ++pairs[static_cast<int>(prev * 10) * 10 + static_cast<int>(u * 10)];
        prev = u;
      }
    }
  }
  ASSERT_EQ(i, kDraws);
  auto chi2 = [](const std::vector<int>& c, double expected) {
    double s = 0.0;
    for (int x : c) s += (x - expected) * (x - expected) / expected;
    return s;
  };
  EXPECT_LT(chi2(counts, kDraws / double{kBins}), 148.23);
  EXPECT_LT(chi2(pairs, kDraws / double{kBins}), 148.23);
}

// The speculative sub-streams (acceptance coin, residual draw) at a step are
// uniform and independent of the token draw at the same step and of each
// other: the token draw, which a draft sharing the seed used to pick the
// token, must not decide its acceptance. Chi-square over 100 bins for each,
// and over 10x10 grids for each pair of purposes at the same step (0.999
// quantile, df 99 → 148.23). The token draw keeps its values.
TEST(RngTest, SpeculativeSubStreamsAreIndependentOfTheTokenDraw) {
  static_assert(UniformDraw(1, 2, 3, DrawPurpose::kSpeculativeAccept) >= 0.0 &&
                UniformDraw(1, 2, 3, DrawPurpose::kSpeculativeAccept) < 1.0);
  constexpr int kBins = 100;
  constexpr int kDraws = 100000;
  std::vector<int> accept(kBins, 0), residual(kBins, 0);
  std::vector<int> token_accept(kBins, 0), token_residual(kBins, 0), accept_residual(kBins, 0);
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t seed = static_cast<uint64_t>(i % 7);
    const uint64_t stream = static_cast<uint64_t>(i % 3);
    const uint64_t step = static_cast<uint64_t>(i);
    const double u = UniformDraw(seed, stream, step);
    const double a = UniformDraw(seed, stream, step, DrawPurpose::kSpeculativeAccept);
    const double r = UniformDraw(seed, stream, step, DrawPurpose::kSpeculativeResidual);
    ASSERT_NE(u, a);
    ASSERT_NE(u, r);
    ASSERT_NE(a, r);
    ++accept[static_cast<int>(a * kBins)];
    ++residual[static_cast<int>(r * kBins)];
    ++token_accept[static_cast<int>(u * 10) * 10 + static_cast<int>(a * 10)];
    ++token_residual[static_cast<int>(u * 10) * 10 + static_cast<int>(r * 10)];
    ++accept_residual[static_cast<int>(a * 10) * 10 + static_cast<int>(r * 10)];
  }
  auto chi2 = [](const std::vector<int>& c) {
    const double expected = kDraws / double{kBins};
    double s = 0.0;
    for (int x : c) s += (x - expected) * (x - expected) / expected;
    return s;
  };
  EXPECT_LT(chi2(accept), 148.23);
  EXPECT_LT(chi2(residual), 148.23);
  EXPECT_LT(chi2(token_accept), 148.23);
  EXPECT_LT(chi2(token_residual), 148.23);
  EXPECT_LT(chi2(accept_residual), 148.23);
}

}  // namespace
}  // namespace tandem::sampling
