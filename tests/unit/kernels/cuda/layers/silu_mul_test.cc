// SiluMul (kernels/cuda/layers/silu_mul.cu) under emulation against
// kernels::SiluMul (the reference loop), in several execution orders.
// Tolerance: relative 1e-6 (+1e-30 absolute): the device evaluates the
// reference's expression with expf (at most 2 ulp on a GPU) and IEEE
// division, which bounds its error to a few ulp. Under emulation both sides
// call the same libm, so the measured error is 0.
#include "kernels/cuda/layers/silu_mul.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "tests/unit/kernels/cuda/cuda_kernel_test_util.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;
using kernels::testing::RandomFloats;

constexpr double kRelTolerance = 1e-6;

// Checks SiluMul of n random elements against the reference; returns the
// largest relative error.
double ExpectMatchesReference(int64_t n, float gate_range, unsigned seed) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " gate in ±" << gate_range);
  std::mt19937 rng(seed);
  std::vector<float> gate = RandomFloats(rng, n, -gate_range, gate_range);
  const std::vector<float> up = RandomFloats(rng, n, -3, 3);
  DeviceBuffer<float> d_gate(gate), d_up(up);
  EXPECT_TRUE(SiluMul(d_gate.get(), d_up.get(), n, nullptr).ok());
  kernels::SiluMul(gate.data(), up.data(), n);
  const std::vector<float> got = d_gate.Download();
  double max_rel = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - gate[i]);
    EXPECT_LE(err, kRelTolerance * std::fabs(gate[i]) + 1e-30) << "element " << i;
    if (gate[i] != 0) max_rel = std::max(max_rel, err / std::fabs(gate[i]));
  }
  return max_rel;
}

class SiluMulTest : public cuda_emu::testing::OrderedTest {};
class SiluMulLargeTest : public cuda_emu::testing::OrderedTest {};

// SmolLM2-135M's FFN: 1536 per token, one decode token and a small batch;
// gates out to ±30 reach both tails of the sigmoid.
TEST_P(SiluMulTest, SmolLmShapes) {
  double max_rel = 0;
  for (int64_t tokens : {1, 9}) {
    max_rel = std::max(max_rel, ExpectMatchesReference(tokens * 1536, 30.0f, 1));
  }
  testing::RecordMaxError("max_relative_error", max_rel);
}

// Sizes around the block size.
TEST_P(SiluMulTest, OddSizes) {
  for (int64_t n : {1, 31, 255, 257, 1000}) ExpectMatchesReference(n, 10.0f, 2);
}

// Past the grid cap (1024 blocks of 256), so that threads loop.
TEST_P(SiluMulLargeTest, ThreadsLoopPastTheGridCap) {
  ExpectMatchesReference(1024 * 256 + 3, 10.0f, 3);
}

TEST_P(SiluMulTest, RejectsNegativeSize) {
  DeviceBuffer<float> buffer(8);
  EXPECT_EQ(SiluMul(buffer.get(), buffer.get(), -1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SiluMul(buffer.get(), buffer.get(), 0, nullptr).ok());
}

INSTANTIATE_TEST_SUITE_P(Orders, SiluMulLargeTest, ::testing::ValuesIn(testing::FewOrders()),
                         cuda_emu::testing::OrderTestName);
INSTANTIATE_TEST_SUITE_P(Orders, SiluMulTest, ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

}  // namespace
}  // namespace tandem::cuda
