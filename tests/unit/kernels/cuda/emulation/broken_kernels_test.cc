// Kernels with CUDA bugs that the emulation must catch: missing barriers
// change the result with the execution order; mismatched barriers, a
// shuffle naming an exited lane and deadlock abort with a message naming the
// kernel, block, thread and source lines. (In the TSan build the
// missing-barrier kernels are checked for a race report instead:
// check_tsan_race.sh.)
#include "tests/unit/kernels/cuda/emulation/broken_kernels.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/emulation/sanitizer_hooks.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

std::vector<ExecutionOrder> OrdersToTry() {
  std::vector<ExecutionOrder> orders = {{ExecutionOrder::Kind::kSequential, 0},
                                        {ExecutionOrder::Kind::kReverse, 0}};
  for (uint64_t seed = 1; seed <= 8; ++seed)
    orders.push_back({ExecutionOrder::Kind::kRandom, seed});
  return orders;
}

class BrokenKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef TANDEM_CUDA_EMU_TSAN
    GTEST_SKIP() << "TSan reports these races (and fails the run): check_tsan_race.sh checks them";
#endif
  }
  void TearDown() override { SetExecutionOrder({}); }
};

TEST_F(BrokenKernelsTest, TreeReductionWithoutBarriersDependsOnTheOrder) {
  std::vector<float> in(256);
  for (int i = 0; i < 256; ++i) in[i] = static_cast<float>(i + 1);
  const float expected = 256.0f * 257.0f / 2.0f;
  int wrong = 0;
  for (const ExecutionOrder& order : OrdersToTry()) {
    SetExecutionOrder(order);
    EXPECT_EQ(RunTreeReduction(in, /*with_barriers=*/true), expected) << ExecutionOrderName(order);
    if (RunTreeReduction(in, /*with_barriers=*/false) != expected) ++wrong;
  }
  EXPECT_GT(wrong, 0) << "the missing barrier went unnoticed in every order";
}

TEST_F(BrokenKernelsTest, BroadcastWithoutBarrierDependsOnTheOrder) {
  int wrong = 0;
  int value = 1000;
  for (const ExecutionOrder& order : OrdersToTry()) {
    SetExecutionOrder(order);
    // A value no earlier launch stored, so a stale read is visible.
    ++value;
    EXPECT_EQ(RunBroadcast(value, 64, /*with_barrier=*/true), std::vector<int>(64, value))
        << ExecutionOrderName(order);
    ++value;
    if (RunBroadcast(value, 64, /*with_barrier=*/false) != std::vector<int>(64, value)) ++wrong;
  }
  EXPECT_GT(wrong, 0) << "the missing barrier went unnoticed in every order";
}

// kMismatchLine is the line above the kernel; the message check counts from
// it.
constexpr int kMismatchLine = __LINE__;
__global__ void MismatchedBarriersKernel(int* out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = 1;
    __syncthreads();
  } else {
    __syncthreads();
  }
}
constexpr int kFirstBarrierLine = kMismatchLine + 4;
constexpr int kSecondBarrierLine = kMismatchLine + 6;

void RunMismatchedBarriers() {
  SetExecutionOrder({ExecutionOrder::Kind::kSequential, 0});
  DeviceBuffer<int> out(32);
  TANDEM_LAUNCH(MismatchedBarriersKernel, 2, 32, 0, nullptr, out.get());
}

TEST(BrokenKernelsDeathTest, MismatchedBarriersAbortNamingBothLines) {
  const std::string file = "broken_kernels_test\\.cc";
  EXPECT_DEATH(RunMismatchedBarriers(),
               "kernel 'MismatchedBarriersKernel' block \\(0,0,0\\) thread \\(16,0,0\\): "
               "mismatched barriers: __syncthreads at [^ ]*" +
                   file + ":" + std::to_string(kSecondBarrierLine) + " while thread \\(0,0,0\\) " +
                   "waits at __syncthreads at [^ ]*" + file + ":" +
                   std::to_string(kFirstBarrierLine));
}

constexpr int kMixedLine = __LINE__;
__global__ void BarrierAgainstShuffleKernel(int* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
  }
}

TEST(BrokenKernelsDeathTest, BarrierAgainstShuffleAborts) {
  auto run = [] {
    SetExecutionOrder({ExecutionOrder::Kind::kSequential, 0});
    DeviceBuffer<int> out(32);
    TANDEM_LAUNCH(BarrierAgainstShuffleKernel, 1, 32, 0, nullptr, out.get());
  };
  EXPECT_DEATH(run(), "thread \\(1,0,0\\): __shfl_sync at [^ ]*broken_kernels_test\\.cc:" +
                          std::to_string(kMixedLine + 5) +
                          ": mask 0xffffffff names lane 0 \\(thread \\(0,0,0\\)\\), which waits at "
                          "__syncthreads at [^ ]*broken_kernels_test\\.cc:" +
                          std::to_string(kMixedLine + 3));
}

constexpr int kExitedLaneLine = __LINE__;
__global__ void ShuffleFromExitedLaneKernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x), 0);
}

void RunShuffleFromExitedLane(ExecutionOrder::Kind kind) {
  SetExecutionOrder({kind, 0});
  DeviceBuffer<int> out(32);
  TANDEM_LAUNCH(ShuffleFromExitedLaneKernel, 1, 32, 0, nullptr, out.get());
}

TEST(BrokenKernelsDeathTest, ShuffleNamingAnExitedLaneAborts) {
  const std::string message =
      "kernel 'ShuffleFromExitedLaneKernel' block \\(0,0,0\\) thread \\(" + std::string("[0-9]+") +
      ",0,0\\): __shfl_sync at [^ ]*" +
      "broken_kernels_test\\.cc:" + std::to_string(kExitedLaneLine + 3) +
      ": mask 0xffffffff names lane 16 \\(thread \\(16,0,0\\)\\), which has exited";
  // The waiting lanes see lane 16 exit (sequential), or find it exited on
  // arrival (reverse).
  EXPECT_DEATH(RunShuffleFromExitedLane(ExecutionOrder::Kind::kSequential), message);
  EXPECT_DEATH(RunShuffleFromExitedLane(ExecutionOrder::Kind::kReverse), message);
}

__global__ void DifferentCollectivesKernel(unsigned* out) {
  if (threadIdx.x == 0) {
    out[0] = __ballot_sync(0xffffffffu, 1);
  } else {
    out[threadIdx.x] = static_cast<unsigned>(__shfl_sync(0xffffffffu, 1, 0));
  }
}

TEST(BrokenKernelsDeathTest, DifferentCollectivesInOneWarpAbort) {
  auto run = [] {
    SetExecutionOrder({ExecutionOrder::Kind::kSequential, 0});
    DeviceBuffer<unsigned> out(32);
    TANDEM_LAUNCH(DifferentCollectivesKernel, 1, 32, 0, nullptr, out.get());
  };
  EXPECT_DEATH(run(),
               "thread \\(1,0,0\\): __shfl_sync at .*names lane 0 .*which waits at "
               "__ballot_sync with mask 0xffffffff");
}

// Three lanes each wait for the next one's different collective: no single
// arrival is wrong, yet nothing can run.
__global__ void CyclicWaitKernel(int* out) {
  const unsigned masks[3] = {0x3u, 0x6u, 0x5u};
  out[threadIdx.x] = __shfl_sync(masks[threadIdx.x], 1, 0);
}

TEST(BrokenKernelsDeathTest, DeadlockAbortsListingTheWaiters) {
  auto run = [] {
    SetExecutionOrder({ExecutionOrder::Kind::kSequential, 0});
    DeviceBuffer<int> out(3);
    TANDEM_LAUNCH(CyclicWaitKernel, 1, 3, 0, nullptr, out.get());
  };
  EXPECT_DEATH(run(),
               "kernel 'CyclicWaitKernel' block \\(0,0,0\\): deadlock: 3 live threads, none "
               "can run:\n  thread \\(0,0,0\\) waits at __shfl_sync with mask 0x00000003");
}

__global__ void BadMaskKernel(int* out) { out[threadIdx.x] = __shfl_sync(0x1u, 1, 0); }
__global__ void BadWidthKernel(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1, 12);
}

TEST(BrokenKernelsDeathTest, MaskWithoutTheCallerOrBadWidthAborts) {
  auto run_mask = [] {
    SetExecutionOrder({ExecutionOrder::Kind::kSequential, 0});
    DeviceBuffer<int> out(32);
    TANDEM_LAUNCH(BadMaskKernel, 1, 32, 0, nullptr, out.get());
  };
  auto run_width = [] {
    DeviceBuffer<int> out(32);
    TANDEM_LAUNCH(BadWidthKernel, 1, 32, 0, nullptr, out.get());
  };
  EXPECT_DEATH(run_mask(),
               "thread \\(1,0,0\\): __shfl_sync at .*: mask 0x00000001 does not name "
               "the calling lane 1");
  EXPECT_DEATH(run_width(), "__shfl_xor_sync at .*: width 12 is not a power of two in \\[1, 32\\]");
}

}  // namespace
}  // namespace tandem::cuda_emu::testing
