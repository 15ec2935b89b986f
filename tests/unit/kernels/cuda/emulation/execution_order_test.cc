// ExecutionOrder parsing and the order it gives a block's threads.
#include "kernels/cuda/emulation/execution_order.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

TEST(ExecutionOrderTest, ParsesEachKindAndRejectsTheRest) {
  ASSERT_TRUE(ParseExecutionOrder("sequential").ok());
  EXPECT_EQ(ParseExecutionOrder("reverse")->kind, ExecutionOrder::Kind::kReverse);
  absl::StatusOr<ExecutionOrder> random = ParseExecutionOrder("random:18446744073709551615");
  ASSERT_TRUE(random.ok());
  EXPECT_EQ(random->kind, ExecutionOrder::Kind::kRandom);
  EXPECT_EQ(random->seed, 18446744073709551615ull);
  EXPECT_EQ(ExecutionOrderName(*random), "random:18446744073709551615");
  for (const char* bad : {"", "random", "random:", "random:x1", "random:-1", "Sequential", "rev"}) {
    absl::StatusOr<ExecutionOrder> order = ParseExecutionOrder(bad);
    ASSERT_FALSE(order.ok()) << bad;
    EXPECT_NE(order.status().message().find(bad), std::string::npos) << order.status();
  }
}

// Each thread appends its index to a log at its first step: the log is the
// order the threads first ran.
__global__ void LogOrderKernel(int* log, int* next) {
  log[atomicAdd(next, 1)] = static_cast<int>(threadIdx.x);
}

std::vector<int> RunOrder(const ExecutionOrder& order) {
  SetExecutionOrder(order);
  DeviceBuffer<int> log(64);
  DeviceBuffer<int> next(std::vector<int>{0});
  TANDEM_LAUNCH(LogOrderKernel, 1, 64, 0, nullptr, log.get(), next.get());
  return log.Download();
}

TEST(ExecutionOrderTest, OrdersThreadsAsNamed) {
  std::vector<int> sequential(64);
  for (int i = 0; i < 64; ++i) sequential[i] = i;
  std::vector<int> reverse(sequential.rbegin(), sequential.rend());
  EXPECT_EQ(RunOrder({ExecutionOrder::Kind::kSequential, 0}), sequential);
  EXPECT_EQ(RunOrder({ExecutionOrder::Kind::kReverse, 0}), reverse);
  const std::vector<int> random1 = RunOrder({ExecutionOrder::Kind::kRandom, 1});
  EXPECT_EQ(RunOrder({ExecutionOrder::Kind::kRandom, 1}), random1);  // reproducible
  EXPECT_NE(random1, sequential);
  EXPECT_NE(RunOrder({ExecutionOrder::Kind::kRandom, 2}), random1);
  std::vector<int> sorted = random1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, sequential);
  SetExecutionOrder({});
}

}  // namespace
}  // namespace tandem::cuda_emu::testing
