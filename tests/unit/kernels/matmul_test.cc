// MatMul over every supported weight type, ISA, batch size and thread count.
//
// Tolerances (per output y = Σ_i w_i x_i; A = Σ_i |w_i x_i|, w_i the
// dequantized weights):
//  - reference precision (quantize_activations=false) vs a double-precision
//    dot of DequantizeRowRef rows: |y - y64| <= cols · 2^-24 · A (the fp32
//    summation bound), for every ISA.
//  - quantized activations vs reference precision: x_i is replaced by
//    d_b·q_i with |x_i - d_b q_i| <= d_b / 2 (d_b = max|x| in its block / 127),
//    so |y_q - y_f| <= Σ_i |w_i| d_b / 2 + 2 · cols · 2^-24 · A.
//  - quantized AVX vs quantized reference: 1e-5 · A (summation order only).
//  - 1 vs 2 threads, a row computed alone vs inside a batch of 17, any batch
//    size (1 .. 64), and MatMulMany vs one MatMul per matrix: bit-identical.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

using gguf::GgmlType;
using testing::AvailableIsas;
using testing::RandomFloats;
using testing::RandomWeights;

struct Problem {
  GgmlType type;
  int64_t rows, cols, row_bytes;
  std::vector<uint8_t> data;
  std::vector<float> dequant;  // [rows, cols]
  WeightView View() const { return {type, data.data(), rows, cols, row_bytes}; }
};

Problem MakeProblem(std::mt19937& rng, GgmlType type, int64_t rows, int64_t cols) {
  Problem p{type, rows, cols, cols / WeightBlockElems(type) * WeightBlockBytes(type) + 8, {}, {}};
  p.data = RandomWeights(rng, type, rows, cols, p.row_bytes);
  p.dequant.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRowRef(type, p.data.data() + r * p.row_bytes, cols, p.dequant.data() + r * cols);
  }
  return p;
}

std::vector<float> RunMatMul(const Problem& p, const std::vector<float>& x, int64_t n, Isa isa,
                             bool quantize, ThreadPool* pool) {
  std::vector<float> y(n * p.rows, NAN);
  MatMulParams params;
  params.isa = isa;
  params.quantize_activations = quantize;
  MatMul(p.View(), x.data(), n, y.data(), params, pool);
  return y;
}

bool IsQuantType(GgmlType t) {
  return t == GgmlType::kQ8_0 || t == GgmlType::kQ4_0 || t == GgmlType::kQ4_1;
}

class MatMulTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatMulTest, AllPathsWithinStatedBounds) {
  const GgmlType type = GetParam();
  std::mt19937 rng(static_cast<unsigned>(type) + 10);
  const int64_t unit = WeightBlockElems(type) == 1 ? 32 : WeightBlockElems(type);
  ThreadPool pool1(1), pool2(2);
  for (int64_t rows : {1, 37, 70}) {
    for (int64_t cols : {unit, 2 * unit, unit == 32 ? 576 : 3 * unit}) {
      Problem p = MakeProblem(rng, type, rows, cols);
      for (int64_t n : {1, 3, 17, 64}) {
        std::vector<float> x = RandomFloats(rng, n * cols, -2, 2);
        std::vector<double> exact(n * rows), abs_sum(n * rows), quant_err(n * rows);
        for (int64_t c = 0; c < n; ++c) {
          for (int64_t r = 0; r < rows; ++r) {
            double e = 0, a = 0, q = 0;
            for (int64_t b = 0; b < cols / 32; ++b) {
              double amax = 0, wabs = 0;
              for (int j = 0; j < 32; ++j) {
                const int64_t i = b * 32 + j;
                const double w = p.dequant[r * cols + i], xv = x[c * cols + i];
                e += w * xv;
                a += std::fabs(w * xv);
                amax = std::max(amax, std::fabs(xv));
                wabs += std::fabs(w);
              }
              q += wabs * amax / 127 / 2;
            }
            exact[c * rows + r] = e;
            abs_sum[c * rows + r] = a;
            quant_err[c * rows + r] = q;
          }
        }
        const double fp = cols * std::ldexp(1.0, -24);
        std::vector<float> quant_ref;
        for (Isa isa : AvailableIsas()) {
          SCOPED_TRACE(::testing::Message() << IsaName(isa) << " rows " << rows << " cols " << cols
                                            << " n " << n);
          std::vector<float> f = RunMatMul(p, x, n, isa, false, &pool2);
          for (int64_t i = 0; i < n * rows; ++i) {
            ASSERT_NEAR(f[i], exact[i], fp * abs_sum[i]) << "f32 path, output " << i;
          }
          ASSERT_EQ(f, RunMatMul(p, x, n, isa, false, &pool1));
          if (!IsQuantType(type)) continue;
          std::vector<float> q = RunMatMul(p, x, n, isa, true, &pool2);
          for (int64_t i = 0; i < n * rows; ++i) {
            ASSERT_NEAR(q[i], f[i], quant_err[i] + 2 * fp * abs_sum[i]) << "q8 path, output " << i;
          }
          if (isa == Isa::kReference) {
            quant_ref = q;
          } else {
            for (int64_t i = 0; i < n * rows; ++i) {
              ASSERT_NEAR(q[i], quant_ref[i], 1e-5 * abs_sum[i]) << "vs reference, output " << i;
            }
          }
          ASSERT_EQ(q, RunMatMul(p, x, n, isa, true, &pool1));
          ASSERT_EQ(q, RunMatMul(p, x, n, isa, true, nullptr));
        }
      }
    }
  }
}

TEST_P(MatMulTest, RowResultIndependentOfBatch) {
  const GgmlType type = GetParam();
  std::mt19937 rng(static_cast<unsigned>(type) + 20);
  const int64_t cols = WeightBlockElems(type) == 256 ? 512 : 576;
  Problem p = MakeProblem(rng, type, 75, cols);
  std::vector<float> x = RandomFloats(rng, 17 * cols);
  ThreadPool pool(2);
  for (Isa isa : AvailableIsas()) {
    for (bool quantize : {true, false}) {
      std::vector<float> batch = RunMatMul(p, x, 17, isa, quantize, &pool);
      for (int64_t c : {0, 5, 16}) {
        std::vector<float> one(x.begin() + c * cols, x.begin() + (c + 1) * cols);
        std::vector<float> y = RunMatMul(p, one, 1, isa, quantize, &pool);
        for (int64_t r = 0; r < p.rows; ++r) {
          ASSERT_EQ(y[r], batch[c * p.rows + r]) << IsaName(isa) << " c " << c << " r " << r;
        }
      }
    }
  }
}

// Every batch size takes one of the AVX-512 tile shapes (matvec, full groups
// of 16, padded groups, groups + matvec remainder); the bits must not change.
TEST_P(MatMulTest, RowResultIndependentOfBatchSize) {
  const GgmlType type = GetParam();
  if (!IsQuantType(type)) GTEST_SKIP() << "covered by RowResultIndependentOfBatch";
  std::mt19937 rng(static_cast<unsigned>(type) + 30);
  const int64_t cols = 576;
  Problem p = MakeProblem(rng, type, 83, cols);
  std::vector<float> x = RandomFloats(rng, 64 * cols);
  ThreadPool pool(2);
  for (Isa isa : AvailableIsas()) {
    std::vector<float> full = RunMatMul(p, x, 64, isa, true, &pool);
    for (int64_t n : {1, 2, 5, 6, 15, 16, 17, 21, 22, 33, 63}) {
      std::vector<float> xn(x.begin(), x.begin() + n * cols);
      for (ThreadPool* tp : {&pool, static_cast<ThreadPool*>(nullptr)}) {
        std::vector<float> y = RunMatMul(p, xn, n, isa, true, tp);
        for (int64_t i = 0; i < n * p.rows; ++i) {
          ASSERT_EQ(y[i], full[i]) << IsaName(isa) << " n " << n << " output " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatMulTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                           GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                           GgmlType::kQ4_K, GgmlType::kQ6_K),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           switch (info.param) {
                             case GgmlType::kF32: return std::string("F32");
                             case GgmlType::kF16: return std::string("F16");
                             case GgmlType::kBF16: return std::string("BF16");
                             case GgmlType::kQ8_0: return std::string("Q8_0");
                             case GgmlType::kQ4_0: return std::string("Q4_0");
                             case GgmlType::kQ4_1: return std::string("Q4_1");
                             case GgmlType::kQ4_K: return std::string("Q4_K");
                             default: return std::string("Q6_K");
                           }
                         });

TEST(MatMulLargeTest, ModelShapeThreadedMatchesReference) {
  std::mt19937 rng(99);
  Problem p = MakeProblem(rng, GgmlType::kQ4_1, 1536, 576);
  std::vector<float> x = RandomFloats(rng, 64 * 576);
  ThreadPool pool(2);
  std::vector<float> ref = RunMatMul(p, x, 64, Isa::kReference, true, nullptr);
  for (Isa isa : AvailableIsas()) {
    std::vector<float> got = RunMatMul(p, x, 64, isa, true, &pool);
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_NEAR(got[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << IsaName(isa) << " " << i;
    }
  }
}

}  // namespace
}  // namespace tandem::kernels

namespace tandem::kernels {
namespace {

// MatMulMany must give the bits of one MatMul per matrix, fused (quantized
// types) or not (mixed with F32, or reference precision).
TEST(MatMulManyTest, BitIdenticalToSeparateMatMuls) {
  std::mt19937 rng(77);
  const int64_t cols = 576;
  std::vector<Problem> ps;
  ps.push_back(MakeProblem(rng, GgmlType::kQ4_1, 576 / 4, cols));
  ps.push_back(MakeProblem(rng, GgmlType::kQ4_1, 37, cols));
  ps.push_back(MakeProblem(rng, GgmlType::kQ8_0, 64, cols));
  ps.push_back(MakeProblem(rng, GgmlType::kQ4_0, 5, cols));
  ps.push_back(MakeProblem(rng, GgmlType::kF32, 9, cols));
  ThreadPool pool(2);
  for (int64_t n : {1, 3, 16, 17, 40}) {
    std::vector<float> x = RandomFloats(rng, n * cols);
    for (Isa isa : AvailableIsas()) {
      for (bool quantize : {true, false}) {
        for (size_t count : {size_t{2}, size_t{4}, size_t{5}}) {
          std::vector<WeightView> views;
          std::vector<std::vector<float>> ys;
          std::vector<float*> outs;
          for (size_t i = 0; i < count; ++i) {
            views.push_back(ps[i].View());
            ys.emplace_back(n * ps[i].rows, NAN);
          }
          for (auto& y : ys) outs.push_back(y.data());
          MatMulParams params;
          params.isa = isa;
          params.quantize_activations = quantize;
          MatMulMany(views, x.data(), n, outs, params, &pool);
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(ys[i], RunMatMul(ps[i], x, n, isa, quantize, &pool))
                << IsaName(isa) << " n " << n << " quantize " << quantize << " matrix " << i
                << " of " << count;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
