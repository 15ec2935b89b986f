// AddRmsNorm (kernels/cuda/layers/rms_norm.cu) under emulation against
// kernels::Add followed by kernels::RmsNorm (the reference loops), in several
// execution orders. Tolerances: the updated x bit-identical (one IEEE add per
// element); out within a relative 1e-5 (+1e-30 absolute for exact zeros),
// since the sum of squares is tree-ordered on the device and its rounding
// reaches every element of the row through one factor.
#include "kernels/cuda/layers/rms_norm.cuh"

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

constexpr double kRelTolerance = 1e-5;

// Runs AddRmsNorm on random rows and checks x and out against the
// reference; returns the largest relative error of out.
double ExpectMatchesReference(int64_t num_rows, int64_t dim, bool with_residual, unsigned seed) {
  SCOPED_TRACE(::testing::Message()
               << "rows " << num_rows << " dim " << dim << " residual " << with_residual);
  std::mt19937 rng(seed);
  std::vector<float> x = RandomFloats(rng, num_rows * dim, -4, 4);
  const std::vector<float> residual = RandomFloats(rng, num_rows * dim, -2, 2);
  const std::vector<float> weight = RandomFloats(rng, dim, -1.5f, 1.5f);
  const RmsNormParams params{num_rows, dim, 1e-5f};

  DeviceBuffer<float> d_x(x), d_residual(residual), d_weight(weight), d_out(num_rows * dim);
  EXPECT_TRUE(AddRmsNorm(d_x.get(), with_residual ? d_residual.get() : nullptr, d_weight.get(),
                         d_out.get(), params, nullptr)
                  .ok());
  if (with_residual) kernels::Add(x.data(), residual.data(), num_rows * dim);
  std::vector<float> expected(num_rows * dim);
  kernels::RmsNorm(x.data(), weight.data(), num_rows, dim, params.eps, expected.data());

  EXPECT_EQ(d_x.Download(), x);
  const std::vector<float> out = d_out.Download();
  double max_rel = 0;
  for (int64_t i = 0; i < num_rows * dim; ++i) {
    const double err = std::fabs(static_cast<double>(out[i]) - expected[i]);
    EXPECT_LE(err, kRelTolerance * std::fabs(expected[i]) + 1e-30) << "element " << i;
    if (expected[i] != 0) max_rel = std::max(max_rel, err / std::fabs(expected[i]));
  }
  return max_rel;
}

class RmsNormTest : public cuda_emu::testing::OrderedTest {};

// SmolLM2-135M: hidden 576, one decode token and a prefill chunk.
TEST_P(RmsNormTest, SmolLmShapes) {
  double max_rel = 0;
  for (int64_t rows : {1, 37}) {
    for (bool residual : {true, false}) {
      max_rel = std::max(max_rel, ExpectMatchesReference(rows, 576, residual, 1));
    }
  }
  testing::RecordMaxError("max_relative_error", max_rel);
}

// Rows shorter than a warp, not a multiple of the block, and longer than
// the block (several elements per thread).
TEST_P(RmsNormTest, OddDims) {
  for (int64_t dim : {1, 7, 33, 255, 257, 1000, 4099}) ExpectMatchesReference(3, dim, true, 2);
}

TEST_P(RmsNormTest, ZeroRowGivesZeros) {
  const int64_t dim = 300;
  DeviceBuffer<float> x(std::vector<float>(dim, 0.0f)), w(std::vector<float>(dim, 1.0f)), out(dim);
  ASSERT_TRUE(AddRmsNorm(x.get(), nullptr, w.get(), out.get(), {1, dim, 1e-6f}, nullptr).ok());
  EXPECT_EQ(out.Download(), std::vector<float>(dim, 0.0f));
}

TEST_P(RmsNormTest, RejectsBadParams) {
  DeviceBuffer<float> buffer(64);
  float* p = buffer.get();
  EXPECT_EQ(AddRmsNorm(p, p, p, p, {1, 0, 1e-5f}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddRmsNorm(p, p, p, p, {-1, 8, 1e-5f}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddRmsNorm(p, p, p, p, {1, 8, -1.0f}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(AddRmsNorm(p, p, p, p, {0, 8, 1e-5f}, nullptr).ok());
}

INSTANTIATE_TEST_SUITE_P(Orders, RmsNormTest, ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

}  // namespace
}  // namespace tandem::cuda
