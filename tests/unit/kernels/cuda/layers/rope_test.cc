// Rope (kernels/cuda/layers/rope.cu) under emulation against kernels::Rope, in
// several execution orders. Tolerance: 1e-5 absolute. The device repeats the
// reference's angle recurrence bit for bit and its unfused rotation, so the
// only difference on a GPU is cosf / sinf (at most 2 ulp each, against the
// host's libm): (|x0| + |x1|) · 2.4e-7 < 1e-5 for the |x| <= 4 used here.
// Under emulation both sides call the same libm, so the measured error is 0.
#include "kernels/cuda/layers/rope.cuh"

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

constexpr double kAbsTolerance = 1e-5;

// Rotates random x at `positions` on the device and with kernels::Rope;
// returns the largest absolute difference.
double ExpectMatchesReference(const RopeParams& p, const std::vector<int32_t>& positions,
                              unsigned seed) {
  SCOPED_TRACE(::testing::Message() << "tokens " << p.num_tokens << " heads " << p.num_heads
                                    << " head_dim " << p.head_dim << " rope_dim " << p.rope_dim);
  std::mt19937 rng(seed);
  std::vector<float> x = RandomFloats(rng, p.num_tokens * p.num_heads * p.head_dim, -4, 4);
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<int32_t> d_positions(positions);
  EXPECT_TRUE(Rope(d_x.get(), d_positions.get(), p, nullptr).ok());
  kernels::Rope(x.data(), positions.data(), p.num_tokens, p.num_heads, p.head_dim, p.rope_dim,
                p.freq_base);
  const std::vector<float> got = d_x.Download();
  double max_err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - x[i]);
    EXPECT_LE(err, kAbsTolerance) << "element " << i;
    max_err = std::max(max_err, err);
  }
  return max_err;
}

std::vector<int32_t> RandomPositions(int64_t n, int32_t max, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> positions(n);
  for (int32_t& p : positions) p = static_cast<int32_t>(rng() % (max + 1));
  return positions;
}

class RopeTest : public cuda_emu::testing::OrderedTest {};

// SmolLM2-135M: q with 9 heads, k with 3, head_dim 64, base 100000; a
// prefill chunk at consecutive positions and a decode batch at far ones.
TEST_P(RopeTest, SmolLmShapes) {
  std::vector<int32_t> prefill(40);
  for (int i = 0; i < 40; ++i) prefill[i] = 100 + i;
  const std::vector<int32_t> decode = {0, 1, 2047, 8191};
  double max_err = 0;
  for (int64_t heads : {9, 3}) {
    max_err = std::max(max_err, ExpectMatchesReference({40, heads, 64, 64, 100000.0f}, prefill, 1));
    max_err = std::max(max_err, ExpectMatchesReference({4, heads, 64, 64, 100000.0f}, decode, 2));
  }
  testing::RecordMaxError("max_abs_error", max_err);
}

// Partial rotation (elements past rope_dim untouched), more pairs than
// threads, a head_dim that is not a power of two, and one pair.
TEST_P(RopeTest, OddShapesAndPartialRotary) {
  ExpectMatchesReference({5, 7, 96, 32, 10000.0f}, RandomPositions(5, 4096, 3), 3);
  ExpectMatchesReference({3, 40, 128, 128, 500000.0f}, RandomPositions(3, 100000, 4), 4);
  ExpectMatchesReference({2, 3, 10, 6, 10000.0f}, {7, 3}, 5);
  ExpectMatchesReference({1, 1, 2, 2, 10000.0f}, {12345}, 6);
}

TEST_P(RopeTest, RejectsBadParams) {
  DeviceBuffer<float> x(64);
  DeviceBuffer<int32_t> positions(std::vector<int32_t>{0});
  auto rope = [&](RopeParams p) { return Rope(x.get(), positions.get(), p, nullptr).code(); };
  EXPECT_EQ(rope({1, 1, 64, 63, 1e4f}), absl::StatusCode::kInvalidArgument);  // odd
  EXPECT_EQ(rope({1, 1, 64, 66, 1e4f}), absl::StatusCode::kInvalidArgument);  // > head_dim
  EXPECT_EQ(rope({1, 1, 64, 0, 1e4f}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rope({1, 0, 64, 64, 1e4f}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rope({1, 1, 64, 64, 0.0f}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rope({-1, 1, 64, 64, 1e4f}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rope({0, 1, 64, 64, 1e4f}), absl::StatusCode::kOk);
}

INSTANTIATE_TEST_SUITE_P(Orders, RopeTest, ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

}  // namespace
}  // namespace tandem::cuda
