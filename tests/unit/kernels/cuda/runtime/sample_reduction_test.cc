// BlockSumKernel (kernels/cuda/runtime/sample_reduction.cu) under emulation against
// a double-precision CPU sum, in several execution orders. Tolerance: fp32
// sums of n uniform [-1, 1) values in a different order differ by far less
// than 1e-4 * n.
#include "kernels/cuda/runtime/sample_reduction.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;

void ExpectBlockSums(int n, int num_blocks, int threads) {
  std::mt19937 rng(static_cast<unsigned>(n * 31 + num_blocks * 7 + threads));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> in(n);
  for (float& x : in) x = uniform(rng);
  std::vector<double> expected(num_blocks, 0.0);
  for (int i = 0; i < n; ++i) expected[i / threads % num_blocks] += in[i];
  DeviceBuffer<float> device_in(in);
  DeviceBuffer<float> sums(num_blocks);
  ASSERT_EQ(LaunchBlockSum(device_in.get(), sums.get(), n, num_blocks, threads, nullptr),
            cudaSuccess);
  const std::vector<float> got = sums.Download();
  for (int b = 0; b < num_blocks; ++b) {
    EXPECT_NEAR(got[b], expected[b], 1e-4 * n / num_blocks + 1e-6)
        << "n " << n << " blocks " << num_blocks << " threads " << threads << " block " << b;
  }
}

class SampleReductionTest : public cuda_emu::testing::OrderedTest {};

TEST_P(SampleReductionTest, MatchesTheCpuSum) {
  ExpectBlockSums(1, 1, 32);
  ExpectBlockSums(1000, 1, 256);
  ExpectBlockSums(5000, 3, 128);
  ExpectBlockSums(4096, 4, 1024);
  ExpectBlockSums(100, 8, 64);  // most threads see no element
}

TEST_P(SampleReductionTest, RejectsBadShapes) {
  DeviceBuffer<float> buffer(64);
  EXPECT_EQ(LaunchBlockSum(buffer.get(), buffer.get(), 64, 1, 48, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBlockSum(buffer.get(), buffer.get(), 64, 1, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBlockSum(buffer.get(), buffer.get(), 64, 0, 64, nullptr), cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(Orders, SampleReductionTest,
                         ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

// Run by CTest with TANDEM_CUDA_EMU_ORDER set (cuda_sample_reduction_test_env_order).
TEST(SampleReductionEnvironmentOrderTest, UsesTheEnvironmentOrder) {
  const char* env = std::getenv("TANDEM_CUDA_EMU_ORDER");
  if (env == nullptr) GTEST_SKIP() << "TANDEM_CUDA_EMU_ORDER not set";
  EXPECT_EQ(cuda_emu::ExecutionOrderName(cuda_emu::CurrentExecutionOrder()), env);
  ExpectBlockSums(5000, 3, 128);
}

}  // namespace
}  // namespace tandem::cuda
