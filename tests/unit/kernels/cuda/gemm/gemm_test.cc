// Gemm (kernels/cuda/gemm/gemm.h) under emulation, where its library is the CPU
// matmul, against kernels::MatMul in reference precision (reference isa,
// quantize_activations = false; for BF16 weights on x rounded to bf16), and
// its operand kernels (gemm_operands.cuh), which the cuBLAS build runs too,
// against the CPU's bits. Tolerance of a product, per output y = Σ_k x_k w_k
// with A = Σ_k |x_k w_k| over the dequantized weights: |y - y_ref| <= 1e-4 ·
// A, as for Gemv: the two sides sum in fp32 in different orders (the CPU
// matmul at BestIsa() here, cuBLAS's tiling on a GPU), which stays near
// cols · 2^-24 · A. Activations not rounded to bf16 for a BF16 weight, or
// quantized to int8, would miss it by an order of magnitude.
#include "kernels/cuda/gemm/gemm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/thread_pool.h"
#include "kernels/cpu/dequantize_ref.h"
#include "kernels/cuda/gemm/gemm_operands.cuh"
#include "kernels/cuda/runtime/device_buffer.h"
#include "kernels/ggml_type.h"
#include "kernels/kernels.h"
#include "kernels/quant_formats.h"
#include "tests/unit/kernels/cuda/cuda_kernel_test_util.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace tandem::cuda {
namespace {

using gguf::GgmlType;
using kernels::testing::RandomFloats;
using testing::PaddedRowBytes;

// Device memory for test inputs and outputs: cudaMalloc directly, so not
// counted by DeviceAllocationCount.
template <typename T>
using TestBuffer = cuda_emu::testing::DeviceBuffer<T>;

constexpr double kTolerance = 1e-4;  // relative to A = Σ|x w|
// Floats after y that Run must leave alone (poisoned, 0xFFFFFFFF).
constexpr int64_t kGuard = 5;

constexpr GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kBF16, GgmlType::kF16,
                               GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1};

struct Case {
  GgmlType type;
  int64_t rows, cols, n;
};

// x with every element rounded to bf16 (nearest even), as Gemm's BF16 path
// multiplies it.
std::vector<float> RoundedToBf16(const std::vector<float>& x) {
  std::vector<float> rounded(x.size());
  for (size_t i = 0; i < x.size(); ++i) rounded[i] = gguf::Bf16ToFp32(gguf::Fp32ToBf16(x[i]));
  return rounded;
}

// Σ_k |x_k w_k| in double: the scale of the rounding error of x · w.
double AbsDot(const float* x, const float* w, int64_t n) {
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += std::fabs(static_cast<double>(x[k]) * w[k]);
  return sum;
}

// Runs gemm on random weights and activations and checks it against the
// reference; returns the largest |y - y_ref| / A.
double ExpectMatchesReference(Gemm& gemm, const Case& c, unsigned seed) {
  SCOPED_TRACE(::testing::Message() << gguf::TypeName(c.type) << " rows " << c.rows << " cols "
                                    << c.cols << " n " << c.n);
  std::mt19937 rng(seed);
  const int64_t row_bytes = PaddedRowBytes(c.type, c.cols);
  const std::vector<uint8_t> w =
      kernels::testing::RandomWeights(rng, c.type, c.rows, c.cols, row_bytes);
  const std::vector<float> x = RandomFloats(rng, c.n * c.cols, -2, 2);
  const std::vector<float> x_ref = c.type == GgmlType::kBF16 ? RoundedToBf16(x) : x;
  const kernels::WeightView host_view{c.type, w.data(), c.rows, c.cols, row_bytes};
  std::vector<float> expected(c.n * c.rows);
  kernels::MatMul(host_view, x_ref.data(), c.n, expected.data(),
                  {.isa = kernels::Isa::kReference, .quantize_activations = false}, nullptr);

  TestBuffer<uint8_t> d_w(w);
  TestBuffer<float> d_x(x), d_y(c.n * c.rows + kGuard);
  kernels::WeightView view = host_view;
  view.data = d_w.get();
  const absl::Status status = gemm.Run(view, d_x.get(), c.n, d_y.get());
  if (!status.ok()) {
    ADD_FAILURE() << status;
    return 0;
  }
  const std::vector<float> y = d_y.Download();

  std::vector<float> wf(c.cols);
  double max_rel = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    kernels::DequantizeRowRef(c.type, w.data() + r * row_bytes, c.cols, wf.data());
    for (int64_t i = 0; i < c.n; ++i) {
      const double a = AbsDot(x_ref.data() + i * c.cols, wf.data(), c.cols);
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

std::unique_ptr<Gemm> CreateOrDie(const GemmLimits& limits, ThreadPool* pool) {
  absl::StatusOr<std::unique_ptr<Gemm>> gemm = Gemm::Create(limits, nullptr, pool);
  EXPECT_TRUE(gemm.ok()) << gemm.status();
  return gemm.ok() ? std::move(*gemm) : nullptr;
}

class GemmTest : public cuda_emu::testing::OrderedTest {};

// Every type at prefill-like batch sizes; 576 is SmolLM2-135M's hidden size.
// Rows are padded (PaddedRowBytes), so the row stride is not cols.
TEST_P(GemmTest, MatchesReference) {
  ThreadPool pool(2);
  constexpr int64_t kRows = 40;
  std::unique_ptr<Gemm> gemm = CreateOrDie({64, 576, kRows * 576}, &pool);
  ASSERT_NE(gemm, nullptr);
  double max_rel = 0;
  for (GgmlType type : kTypes) {
    for (int64_t cols : {64, 576}) {
      for (int64_t n : {1, 3, 17, 64}) {
        max_rel = std::max(max_rel, ExpectMatchesReference(*gemm, {type, kRows, cols, n}, 1));
      }
    }
  }
  testing::RecordMaxError("max_error_over_abs_sum", max_rel);
}

// A single-threaded CPU stand-in (no pool) and a weight of one row.
TEST_P(GemmTest, MatchesReferenceWithoutPool) {
  std::unique_ptr<Gemm> gemm = CreateOrDie({5, 96, 7 * 32}, nullptr);
  ASSERT_NE(gemm, nullptr);
  for (GgmlType type : kTypes) {
    ExpectMatchesReference(*gemm, {type, 1, 96, 5}, 2);
    ExpectMatchesReference(*gemm, {type, 7, 32, 2}, 3);
  }
}

// The workspace is allocated at Create; Run allocates nothing.
TEST_P(GemmTest, RunAllocatesNothing) {
  const int64_t before_create = DeviceAllocationCount();
  std::unique_ptr<Gemm> gemm = CreateOrDie({17, 576, 40 * 576}, nullptr);
  ASSERT_NE(gemm, nullptr);
  EXPECT_GT(DeviceAllocationCount(), before_create);
  const int64_t before_run = DeviceAllocationCount();
  for (GgmlType type : kTypes) ExpectMatchesReference(*gemm, {type, 40, 576, 17}, 4);
  EXPECT_EQ(DeviceAllocationCount(), before_run);
}

// n = 0 and a weight of no rows enqueue nothing and leave y alone.
TEST_P(GemmTest, EmptyProductsWriteNothing) {
  std::unique_ptr<Gemm> gemm = CreateOrDie({4, 64, 64 * 64}, nullptr);
  ASSERT_NE(gemm, nullptr);
  TestBuffer<uint8_t> w(64 * 64 * 4);
  TestBuffer<float> x(4 * 64), y(4 * 64);
  const kernels::WeightView view{GgmlType::kQ8_0, w.get(), 64, 64, 68};
  EXPECT_TRUE(gemm->Run(view, x.get(), 0, y.get()).ok());
  const kernels::WeightView no_rows{GgmlType::kBF16, w.get(), 0, 64, 128};
  EXPECT_TRUE(gemm->Run(no_rows, x.get(), 4, y.get()).ok());
  for (float v : y.Download()) EXPECT_EQ(std::bit_cast<uint32_t>(v), 0xffffffffu);
}

// Whether `status` is INVALID_ARGUMENT and its message names every one of
// `values`.
void ExpectInvalidNaming(const absl::Status& status, const std::vector<std::string>& values) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& value : values) {
    EXPECT_NE(status.message().find(value), std::string::npos) << value << " in " << status;
  }
}

TEST_P(GemmTest, RejectsCallsBeyondItsLimits) {
  std::unique_ptr<Gemm> gemm = CreateOrDie({8, 128, 1000}, nullptr);
  ASSERT_NE(gemm, nullptr);
  TestBuffer<uint8_t> w(1 << 16);
  TestBuffer<float> x(16 * 256), y(16 * 256);
  auto run = [&](GgmlType type, int64_t rows, int64_t cols, int64_t row_bytes, int64_t n) {
    const kernels::WeightView view{type, w.get(), rows, cols, row_bytes};
    return gemm->Run(view, x.get(), n, y.get());
  };
  ExpectInvalidNaming(run(GgmlType::kF32, 4, 64, 256, 9), {"n 9", "max_rows 8"});
  ExpectInvalidNaming(run(GgmlType::kF32, 4, 64, 256, -1), {"n -1"});
  ExpectInvalidNaming(run(GgmlType::kBF16, 4, 160, 320, 1), {"cols 160", "max_cols 128"});
  // 8 x 128 = 1024 quantized elements against a limit of 1000.
  ExpectInvalidNaming(run(GgmlType::kQ8_0, 8, 128, 136, 1), {"1024", "max_weight_elements 1000"});
  ExpectInvalidNaming(run(GgmlType::kF16, 8, 128, 256, 1), {"1024", "max_weight_elements 1000"});
  ExpectInvalidNaming(run(GgmlType::kQ4_K, 4, 256, 144, 1), {"Q4_K"});
  ExpectInvalidNaming(run(GgmlType::kQ4_0, 4, 40, 36, 1), {"cols 40"});
  // The weight-size limit is the dequantized types' only: F32 and BF16
  // weights are read in place.
  EXPECT_TRUE(run(GgmlType::kF32, 8, 128, 512, 1).ok());
  EXPECT_TRUE(run(GgmlType::kBF16, 8, 128, 256, 8).ok());
  EXPECT_TRUE(run(GgmlType::kQ4_1, 7, 128, 140, 8).ok());
}

TEST_P(GemmTest, RejectsBadLimits) {
  auto create = [](const GemmLimits& limits) { return Gemm::Create(limits, nullptr, nullptr); };
  ExpectInvalidNaming(create({-1, 64, 0}).status(), {"max_rows -1"});
  ExpectInvalidNaming(create({4, -2, 0}).status(), {"max_cols -2"});
  ExpectInvalidNaming(create({4, 64, -3}).status(), {"max_weight_elements -3"});
  ExpectInvalidNaming(create({int64_t{1} << 31, 64, 0}).status(), {"max_rows 2147483648"});
  EXPECT_TRUE(create({0, 0, 0}).ok());
}

// The rounding kernel of the BF16 path, both outputs, bit for bit against
// the CPU's nearest-even rounding, with exact ties and a count that leaves
// the last block part-full.
TEST_P(GemmTest, RoundToBf16MatchesCpuRounding) {
  std::mt19937 rng(5);
  std::vector<float> x = RandomFloats(rng, 1000, -3, 3);
  // Halfway between two bf16 values, below an even and an odd last bit.
  x[0] = std::bit_cast<float>(0x3f808000u);
  x[1] = std::bit_cast<float>(0x3f818000u);
  x[2] = std::bit_cast<float>(0xc0408000u);
  const int64_t count = static_cast<int64_t>(x.size());
  TestBuffer<float> d_x(x), d_widened(count);
  TestBuffer<__nv_bfloat16> d_bf16(count);
  ASSERT_TRUE(RoundToBf16(d_x.get(), count, d_widened.get(), nullptr).ok());
  ASSERT_TRUE(RoundToBf16(d_x.get(), count, d_bf16.get(), nullptr).ok());
  const std::vector<float> widened = d_widened.Download();
  const std::vector<__nv_bfloat16> bf16 = d_bf16.Download();
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t expected = gguf::Fp32ToBf16(x[i]);
    EXPECT_EQ(std::bit_cast<uint16_t>(bf16[i]), expected) << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(widened[i]), uint32_t{expected} << 16) << i;
  }
  EXPECT_EQ(RoundToBf16(d_x.get(), -1, d_widened.get(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// The dequantization kernel of the Q8_0 / Q4_0 / Q4_1 / F16 path (and the
// other decoded types) has DequantizeRowRef's bits, with padded rows.
TEST_P(GemmTest, DequantizeWeightMatchesReferenceBits) {
  std::mt19937 rng(6);
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(gguf::TypeName(type));
    constexpr int64_t kRows = 9, kCols = 320;
    const int64_t row_bytes = PaddedRowBytes(type, kCols);
    const std::vector<uint8_t> w =
        kernels::testing::RandomWeights(rng, type, kRows, kCols, row_bytes);
    TestBuffer<uint8_t> d_w(w);
    TestBuffer<float> d_out(kRows * kCols + kGuard);
    const kernels::WeightView view{type, d_w.get(), kRows, kCols, row_bytes};
    ASSERT_TRUE(DequantizeWeight(view, d_out.get(), nullptr).ok());
    const std::vector<float> out = d_out.Download();
    std::vector<float> expected(kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      kernels::DequantizeRowRef(type, w.data() + r * row_bytes, kCols, expected.data());
      for (int64_t c = 0; c < kCols; ++c) {
        ASSERT_EQ(std::bit_cast<uint32_t>(out[r * kCols + c]), std::bit_cast<uint32_t>(expected[c]))
            << "row " << r << " col " << c;
      }
    }
    for (int64_t g = 0; g < kGuard; ++g) {
      EXPECT_EQ(std::bit_cast<uint32_t>(out[kRows * kCols + g]), 0xffffffffu) << "guard " << g;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Orders, GemmTest, ::testing::ValuesIn(testing::FewOrders()),
                         cuda_emu::testing::OrderTestName);

}  // namespace
}  // namespace tandem::cuda
