#include "client/step_overhead.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::client {
namespace {

TEST(StepOverheadTest, NoGroupsIsNotApplicable) {
  EXPECT_FALSE(StepOverheadBetween({}, {}).has_value());
}

TEST(StepOverheadTest, CountersThatDoNotMoveAreNotApplicable) {
  // A server that lists its groups but does not fill the counters.
  const std::vector<GroupStepCounters> zeros = {{.address = "127.0.0.1:1"}};
  EXPECT_FALSE(StepOverheadBetween(zeros, zeros).has_value());
  // Counters that did not change during the run.
  const std::vector<GroupStepCounters> idle = {
      {.address = "a", .num_steps = 10, .step_ms = 100, .worker_step_ms = 90}};
  EXPECT_FALSE(StepOverheadBetween(idle, idle).has_value());
}

TEST(StepOverheadTest, OneGroupDelta) {
  const std::vector<GroupStepCounters> before = {
      {.address = "a", .num_steps = 5, .step_ms = 50, .worker_step_ms = 45}};
  const std::vector<GroupStepCounters> after = {
      {.address = "a", .num_steps = 105, .step_ms = 2050, .worker_step_ms = 1945}};
  const std::optional<StepOverhead> o = StepOverheadBetween(before, after);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->num_groups, 1);
  EXPECT_EQ(o->num_steps, 100);
  EXPECT_DOUBLE_EQ(o->step_ms, 2000);
  EXPECT_DOUBLE_EQ(o->worker_step_ms, 1900);
  EXPECT_DOUBLE_EQ(o->mean_step_ms(), 20);
  EXPECT_DOUBLE_EQ(o->mean_worker_step_ms(), 19);
  EXPECT_DOUBLE_EQ(o->overhead_share(), 0.05);
}

TEST(StepOverheadTest, SumsGroupsMatchedByAddressNotPosition) {
  const std::vector<GroupStepCounters> before = {
      {.address = "a", .num_steps = 1, .step_ms = 10, .worker_step_ms = 9},
      {.address = "b", .num_steps = 2, .step_ms = 20, .worker_step_ms = 18}};
  const std::vector<GroupStepCounters> after = {
      {.address = "b", .num_steps = 12, .step_ms = 120, .worker_step_ms = 98},
      {.address = "a", .num_steps = 11, .step_ms = 110, .worker_step_ms = 99}};
  const std::optional<StepOverhead> o = StepOverheadBetween(before, after);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->num_groups, 2);
  EXPECT_EQ(o->num_steps, 20);
  EXPECT_DOUBLE_EQ(o->step_ms, 200);
  EXPECT_DOUBLE_EQ(o->worker_step_ms, 170);
  EXPECT_DOUBLE_EQ(o->overhead_share(), 0.15);
}

TEST(StepOverheadTest, AddedGroupCountsFromZeroRemovedGroupIsLeftOut) {
  const std::vector<GroupStepCounters> before = {
      {.address = "gone", .num_steps = 7, .step_ms = 70, .worker_step_ms = 60},
      {.address = "a", .num_steps = 1, .step_ms = 10, .worker_step_ms = 10}};
  const std::vector<GroupStepCounters> after = {
      {.address = "a", .num_steps = 3, .step_ms = 30, .worker_step_ms = 26},
      {.address = "new", .num_steps = 2, .step_ms = 20, .worker_step_ms = 14}};
  const std::optional<StepOverhead> o = StepOverheadBetween(before, after);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->num_groups, 2);
  EXPECT_EQ(o->num_steps, 4);
  EXPECT_DOUBLE_EQ(o->step_ms, 40);
  EXPECT_DOUBLE_EQ(o->worker_step_ms, 30);
  EXPECT_DOUBLE_EQ(o->overhead_share(), 0.25);
}

TEST(StepOverheadTest, RestartedCountersCountFromZero) {
  // A new group at the same address: its counters are below the old ones.
  const std::vector<GroupStepCounters> before = {
      {.address = "a", .num_steps = 50, .step_ms = 500, .worker_step_ms = 400}};
  const std::vector<GroupStepCounters> after = {
      {.address = "a", .num_steps = 4, .step_ms = 40, .worker_step_ms = 36}};
  const std::optional<StepOverhead> o = StepOverheadBetween(before, after);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->num_steps, 4);
  EXPECT_DOUBLE_EQ(o->step_ms, 40);
  EXPECT_DOUBLE_EQ(o->overhead_share(), 0.1);
}

}  // namespace
}  // namespace tandem::client
