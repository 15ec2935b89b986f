// Gemv (kernels/cuda/gemm/gemv.cu) under emulation against kernels::MatMul in
// reference precision (weights dequantized to f32, quantize_activations =
// false), in several execution orders. Tolerance, per output y = Σ_k x_k w_k
// with A = Σ_k |x_k w_k| over the dequantized weights: |y - y_ref| <= 1e-4 ·
// A. Both sides accumulate in fp32 in different orders (the device: 32 lane
// partials with FMA, then a shuffle tree), so they differ by at most about
// 2 · cols · 2^-24 · A; the measured worst case is far below.
#include "kernels/cuda/gemm/gemv.cuh"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/dequantize_ref.h"
#include "kernels/ggml_type.h"
#include "kernels/kernels.h"
#include "tests/unit/kernels/cuda/cuda_kernel_test_util.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;
using gguf::GgmlType;
using kernels::testing::RandomFloats;
using testing::PaddedRowBytes;

constexpr double kTolerance = 1e-4;  // relative to A = Σ|x w|
// Floats after y that the kernel must leave alone.
constexpr int64_t kGuard = 5;

struct Case {
  GgmlType type;
  int64_t rows, cols, n;
  bool packed = false;  // rows back to back (else padded past alignment)
};

// Σ_k |x_k w_k| in double: the scale of the rounding error of x · w.
double AbsDot(const float* x, const float* w, int64_t n) {
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += std::fabs(static_cast<double>(x[k]) * w[k]);
  return sum;
}

// Runs one Gemv on random weights and activations and checks it against the
// reference; returns the largest |y - y_ref| / A.
double ExpectMatchesReference(const Case& c, unsigned seed) {
  SCOPED_TRACE(::testing::Message() << gguf::TypeName(c.type) << " rows " << c.rows << " cols "
                                    << c.cols << " n " << c.n);
  std::mt19937 rng(seed);
  const int64_t row_bytes = c.packed ? c.cols / kernels::WeightBlockElems(c.type) *
                                           kernels::WeightBlockBytes(c.type)
                                     : PaddedRowBytes(c.type, c.cols);
  const std::vector<uint8_t> w =
      kernels::testing::RandomWeights(rng, c.type, c.rows, c.cols, row_bytes);
  const std::vector<float> x = RandomFloats(rng, c.n * c.cols, -2, 2);
  const kernels::WeightView host_view{c.type, w.data(), c.rows, c.cols, row_bytes};
  std::vector<float> expected(c.n * c.rows);
  kernels::MatMulParams params;
  params.isa = kernels::Isa::kReference;
  params.quantize_activations = false;
  kernels::MatMul(host_view, x.data(), c.n, expected.data(), params, nullptr);

  DeviceBuffer<uint8_t> d_w(w);
  DeviceBuffer<float> d_x(x), d_y(c.n * c.rows + kGuard);
  kernels::WeightView view = host_view;
  view.data = d_w.get();
  EXPECT_TRUE(Gemv(view, d_x.get(), c.n, d_y.get(), nullptr).ok());
  const std::vector<float> y = d_y.Download();

  std::vector<float> wf(c.cols);
  double max_rel = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    kernels::DequantizeRowRef(c.type, w.data() + r * row_bytes, c.cols, wf.data());
    for (int64_t i = 0; i < c.n; ++i) {
      const double a = AbsDot(x.data() + i * c.cols, wf.data(), c.cols);
      const double err =
          std::fabs(static_cast<double>(y[i * c.rows + r]) - expected[i * c.rows + r]);
      EXPECT_LE(err, kTolerance * a) << "row " << r << " x row " << i;
      if (a > 0) max_rel = std::max(max_rel, err / a);
    }
  }
  for (int64_t g = 0; g < kGuard; ++g) {
    EXPECT_EQ(std::bit_cast<uint32_t>(y[c.n * c.rows + g]), 0xffffffffu) << "guard " << g;
  }
  return max_rel;
}

constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                               GgmlType::kBF16, GgmlType::kF16,  GgmlType::kF32};

class GemvTest : public cuda_emu::testing::OrderedTest {};
class GemvSmolLmTest : public cuda_emu::testing::OrderedTest {};

// SmolLM2-135M's k/v, gate/up and down projections (hidden 576, 3 KV heads
// of 64, FFN 1536) at decode batch sizes. F16 and F32 share BF16's path
// except for the element decode, which the small shapes cover.
TEST_P(GemvSmolLmTest, MatchesReference) {
  double max_rel = 0;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kBF16}) {
    for (const Case& c :
         {Case{type, 192, 576, 5}, Case{type, 1536, 576, 8}, Case{type, 576, 1536, 3}}) {
      max_rel = std::max(max_rel, ExpectMatchesReference(c, 1));
    }
  }
  // BF16 as the device weights lay it out (the vectorized path).
  for (const Case& c : {Case{GgmlType::kBF16, 192, 576, 5, true},
                        Case{GgmlType::kBF16, 576, 1536, 3, true}}) {
    max_rel = std::max(max_rel, ExpectMatchesReference(c, 1));
  }
  testing::RecordMaxError("max_error_over_abs_sum", max_rel);
}

// Every batch size; row counts that leave warps of the last block idle;
// plain-type rows that end inside a group of 32 or a lane's part of 8.
TEST_P(GemvTest, OddShapesAndEveryBatchSize) {
  for (GgmlType type : kTypes) {
    for (int64_t n = 1; n <= kMaxGemvBatch; ++n) ExpectMatchesReference({type, 13, 96, n}, 2);
    ExpectMatchesReference({type, 1, 32 * 37, 2}, 3);
    ExpectMatchesReference({type, 6, 32, 1}, 4);
  }
  for (GgmlType type : {GgmlType::kBF16, GgmlType::kF16, GgmlType::kF32}) {
    for (int64_t cols : {1, 7, 77, 260}) ExpectMatchesReference({type, 5, cols, 3}, 5);
  }
}

// 16-bit rows packed back to back, 16-byte aligned with whole 8-element
// chunks: the vectorized path, with rows shorter than a warp's chunks, an
// unrolled body and a tail, and every batch size; 100 columns (rows not
// 16-byte multiples) take the scalar path.
TEST_P(GemvTest, PackedSixteenBitRows) {
  for (GgmlType type : {GgmlType::kBF16, GgmlType::kF16}) {
    for (int64_t n = 1; n <= kMaxGemvBatch; ++n) {
      ExpectMatchesReference({type, 13, 96, n, /*packed=*/true}, 6);
    }
    ExpectMatchesReference({type, 5, 8 * 32 * 4 * 2 + 8 * 40, 3, true}, 7);
    ExpectMatchesReference({type, 7, 1536, 2, true}, 8);
    ExpectMatchesReference({type, 6, 100, 2, true}, 9);
  }
}

// The vectorized path gives the scalar path's bits: the same weights packed
// (16-byte loads) and padded past alignment (element by element).
TEST_P(GemvTest, VectorLoadsGiveTheScalarBits) {
  constexpr int64_t kRows = 7, kCols = 8 * 32 * 5 + 24, kN = 3;
  for (GgmlType type : {GgmlType::kBF16, GgmlType::kF16}) {
    SCOPED_TRACE(gguf::TypeName(type));
    std::mt19937 rng(10);
    const int64_t packed_bytes = kCols * 2, padded_bytes = PaddedRowBytes(type, kCols);
    const std::vector<uint8_t> packed =
        kernels::testing::RandomWeights(rng, type, kRows, kCols, packed_bytes);
    std::vector<uint8_t> padded(static_cast<size_t>(kRows * padded_bytes), 0);
    for (int64_t r = 0; r < kRows; ++r) {
      std::copy_n(packed.begin() + r * packed_bytes, packed_bytes,
                  padded.begin() + r * padded_bytes);
    }
    DeviceBuffer<uint8_t> d_packed(packed), d_padded(padded);
    DeviceBuffer<float> x(RandomFloats(rng, kN * kCols, -2, 2));
    DeviceBuffer<float> y_vector(kN * kRows), y_scalar(kN * kRows);
    const kernels::WeightView vector_view{type, d_packed.get(), kRows, kCols, packed_bytes};
    const kernels::WeightView scalar_view{type, d_padded.get(), kRows, kCols, padded_bytes};
    ASSERT_TRUE(GemvVectorizes(vector_view, x.get()));
    ASSERT_FALSE(GemvVectorizes(scalar_view, x.get()));
    ASSERT_TRUE(Gemv(vector_view, x.get(), kN, y_vector.get(), nullptr).ok());
    ASSERT_TRUE(Gemv(scalar_view, x.get(), kN, y_scalar.get(), nullptr).ok());
    const std::vector<float> a = y_vector.Download(), b = y_scalar.Download();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << "y " << i;
    }
  }
}

TEST_P(GemvTest, RejectsBadArguments) {
  DeviceBuffer<uint8_t> w(4096);
  DeviceBuffer<float> x(1024), y(1024);
  auto gemv = [&](GgmlType type, int64_t cols, int64_t row_bytes, int64_t n) {
    const kernels::WeightView view{type, w.get(), 4, cols, row_bytes};
    return Gemv(view, x.get(), n, y.get(), nullptr);
  };
  EXPECT_EQ(gemv(GgmlType::kQ8_0, 64, 68, kMaxGemvBatch + 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gemv(GgmlType::kQ8_0, 64, 68, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gemv(GgmlType::kQ6_K, 256, 210, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gemv(GgmlType::kQ4_0, 40, 36, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gemv(GgmlType::kQ4_1, 64, 39, 1).code(), absl::StatusCode::kInvalidArgument);
  // Loads a GPU would fault on: f32 rows 2 bytes apart from alignment, Q8_0
  // blocks (16-bit scales) at odd addresses.
  EXPECT_EQ(gemv(GgmlType::kF32, 16, 66, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gemv(GgmlType::kQ8_0, 64, 69, 1).code(), absl::StatusCode::kInvalidArgument);
  const kernels::WeightView odd{GgmlType::kBF16, w.get() + 1, 4, 16, 32};
  EXPECT_EQ(Gemv(odd, x.get(), 1, y.get(), nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(gemv(GgmlType::kF32, 16, 68, 1).ok());
  EXPECT_TRUE(gemv(GgmlType::kQ8_0, 64, 68, 0).ok());
  const absl::Status status = gemv(GgmlType::kQ8_0, 64, 68, 9);
  EXPECT_NE(status.message().find("9"), std::string::npos) << status;
  EXPECT_NE(status.message().find("8"), std::string::npos) << status;
}

INSTANTIATE_TEST_SUITE_P(Orders, GemvSmolLmTest, ::testing::ValuesIn(testing::FewOrders()),
                         cuda_emu::testing::OrderTestName);
INSTANTIATE_TEST_SUITE_P(Orders, GemvTest, ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

}  // namespace
}  // namespace tandem::cuda
