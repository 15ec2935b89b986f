#include "client/bench_stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem::client {
namespace {

TEST(BenchStatsTest, EmptyIsZero) {
  EXPECT_EQ(Mean({}), 0);
  EXPECT_EQ(PercentileOfSorted({}, 50), 0);
  const LatencySummary s = Summarize({});
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.p50, 0);
  EXPECT_EQ(s.p90, 0);
  EXPECT_EQ(s.p99, 0);
}

TEST(BenchStatsTest, SingleSampleIsEveryStatistic) {
  const LatencySummary s = Summarize({7.5});
  EXPECT_DOUBLE_EQ(s.mean, 7.5);
  EXPECT_DOUBLE_EQ(s.p50, 7.5);
  EXPECT_DOUBLE_EQ(s.p90, 7.5);
  EXPECT_DOUBLE_EQ(s.p99, 7.5);
}

TEST(BenchStatsTest, InterpolatesBetweenClosestRanks) {
  // Unsorted input; sorted it is 1..10. Rank = q/100 * 9.
  const LatencySummary s = Summarize({10, 3, 1, 7, 2, 9, 4, 8, 6, 5});
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.p50, 5.5);   // rank 4.5 → between 5 and 6
  EXPECT_DOUBLE_EQ(s.p90, 9.1);   // rank 8.1 → 9 + 0.1
  EXPECT_DOUBLE_EQ(s.p99, 9.91);  // rank 8.91 → 9 + 0.91
}

TEST(BenchStatsTest, TwoSamples) {
  const std::vector<double> sorted = {100, 200};
  EXPECT_DOUBLE_EQ(PercentileOfSorted(sorted, 0), 100);
  EXPECT_DOUBLE_EQ(PercentileOfSorted(sorted, 50), 150);
  EXPECT_DOUBLE_EQ(PercentileOfSorted(sorted, 90), 190);
  EXPECT_DOUBLE_EQ(PercentileOfSorted(sorted, 100), 200);
  EXPECT_DOUBLE_EQ(Mean(sorted), 150);
}

TEST(BenchStatsTest, PercentilesAreOrdered) {
  const LatencySummary s = Summarize({1, 1, 1, 1, 50, 2, 3, 100});
  EXPECT_LE(s.p50, s.p90);
  EXPECT_LE(s.p90, s.p99);
  EXPECT_DOUBLE_EQ(s.p50, 1.5);  // sorted 1,1,1,1,2,3,50,100; rank 3.5
}

TEST(BenchStatsDeathTest, RejectsPercentileOutOfRange) {
  const std::vector<double> sorted = {1};
  EXPECT_DEATH(PercentileOfSorted(sorted, 101), "101");
}

}  // namespace
}  // namespace tandem::client
