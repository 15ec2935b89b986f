// RmsNorm, Rope, SiluMul, Add against double-precision formulas; the
// ISA-dispatched RmsNorm / SiluMul overloads (every ISA, 1 and 2 threads)
// against the same formulas, with identical bits for any thread count and for
// a row / element computed alone.
// Tolerances: RmsNorm, SiluMul relative 1e-5 (+1e-7 absolute); Add exact; Rope: the angle
// recurrence θ_{i+1} = θ_i · s loses at most (i + 2) ulps of θ_i, so each
// rotated value is within (|x0| + |x1|) · ((i + 2) · 2^-23 · θ_i + 1e-6) of the
// exact rotation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

using testing::AvailableIsas;
using testing::RandomFloats;

TEST(ElementwiseTest, RmsNorm) {
  std::mt19937 rng(1);
  for (int64_t dim : {1, 7, 64, 576}) {
    const int64_t n = 3;
    std::vector<float> x = RandomFloats(rng, n * dim, -4, 4), w = RandomFloats(rng, dim);
    std::vector<float> out(n * dim);
    RmsNorm(x.data(), w.data(), n, dim, 1e-5f, out.data());
    for (int64_t i = 0; i < n; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < dim; ++j) ss += static_cast<double>(x[i * dim + j]) * x[i * dim + j];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
      for (int64_t j = 0; j < dim; ++j) {
        const double e = x[i * dim + j] * inv * w[j];
        ASSERT_NEAR(out[i * dim + j], e, 1e-5 * std::fabs(e) + 1e-7) << dim << " " << i << " " << j;
      }
    }
  }
}

TEST(ElementwiseTest, SiluMulAndAdd) {
  std::mt19937 rng(2);
  for (int64_t n : {1, 13, 1536}) {
    std::vector<float> g = RandomFloats(rng, n, -10, 10), u = RandomFloats(rng, n, -3, 3);
    std::vector<float> g0 = g, a = g;
    SiluMul(g.data(), u.data(), n);
    Add(a.data(), u.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double e = g0[i] / (1.0 + std::exp(-static_cast<double>(g0[i]))) * u[i];
      ASSERT_NEAR(g[i], e, 1e-5 * std::fabs(e) + 1e-7) << i;
      ASSERT_EQ(a[i], g0[i] + u[i]);
    }
  }
}

TEST(ElementwiseTest, IsaOverloadsMatchFormulasAndAreSplitIndependent) {
  std::mt19937 rng(4);
  ThreadPool pool1(1), pool2(2);
  for (Isa isa : testing::AvailableIsas()) {
    for (int64_t dim : {1, 7, 64, 576, 1000}) {
      const int64_t n = 70;  // n · 576 is past the parallel threshold
      std::vector<float> x = RandomFloats(rng, n * dim, -4, 4), w = RandomFloats(rng, dim);
      std::vector<float> out1(n * dim), out2(n * dim), alone(dim);
      RmsNorm(x.data(), w.data(), n, dim, 1e-5f, out1.data(), isa, &pool1);
      RmsNorm(x.data(), w.data(), n, dim, 1e-5f, out2.data(), isa, &pool2);
      ASSERT_EQ(out1, out2) << IsaName(isa) << " dim " << dim;
      for (int64_t i = 0; i < n; ++i) {
        double ss = 0;
        for (int64_t j = 0; j < dim; ++j) ss += static_cast<double>(x[i * dim + j]) * x[i * dim + j];
        const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
        for (int64_t j = 0; j < dim; ++j) {
          const double e = x[i * dim + j] * inv * w[j];
          ASSERT_NEAR(out1[i * dim + j], e, 1e-5 * std::fabs(e) + 1e-7)
              << IsaName(isa) << " " << dim << " " << i << " " << j;
        }
      }
      RmsNorm(x.data() + 5 * dim, w.data(), 1, dim, 1e-5f, alone.data(), isa, nullptr);
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), out1.begin() + 5 * dim)) << IsaName(isa);
    }
    for (int64_t n : {1, 13, 1536, 70000}) {
      std::vector<float> g0 = RandomFloats(rng, n, -10, 10), u = RandomFloats(rng, n, -3, 3);
      if (n > 4) {  // the exp's clamps: far past ±87
        g0[0] = -100.0f;
        g0[1] = 100.0f;
        g0[2] = -87.5f;
        g0[3] = 0.0f;
      }
      std::vector<float> g1 = g0, g2 = g0;
      SiluMul(g1.data(), u.data(), n, isa, &pool1);
      SiluMul(g2.data(), u.data(), n, isa, &pool2);
      ASSERT_EQ(g1, g2) << IsaName(isa) << " n " << n;
      for (int64_t i = 0; i < n; ++i) {
        const double e = g0[i] / (1.0 + std::exp(-static_cast<double>(g0[i]))) * u[i];
        ASSERT_NEAR(g1[i], e, 1e-5 * std::fabs(e) + 1e-7) << IsaName(isa) << " " << i;
      }
      if (n > 1) {  // an element alone (masked tail) gives the same bits
        float one = g0[n - 1];
        SiluMul(&one, &u[n - 1], 1, isa, nullptr);
        ASSERT_EQ(one, g1[n - 1]) << IsaName(isa);
      }
    }
  }
}

TEST(ElementwiseTest, RopeMatchesExactRotation) {
  std::mt19937 rng(3);
  const int64_t tokens = 4, heads = 3, head_dim = 64;
  for (int64_t rope_dim : {64, 32}) {
    const float base = 10000.0f;
    std::vector<int32_t> pos = {0, 1, 37, 4095};
    std::vector<float> x = RandomFloats(rng, tokens * heads * head_dim);
    std::vector<float> y = x;
    Rope(y.data(), pos.data(), tokens, heads, head_dim, rope_dim, base);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const float* xi = x.data() + (t * heads + h) * head_dim;
        const float* yi = y.data() + (t * heads + h) * head_dim;
        for (int64_t i = 0; i < head_dim / 2; ++i) {
          if (2 * i >= rope_dim) {  // past rope_dim: untouched
            ASSERT_EQ(yi[2 * i], xi[2 * i]);
            ASSERT_EQ(yi[2 * i + 1], xi[2 * i + 1]);
            continue;
          }
          const double theta = pos[t] * std::pow(static_cast<double>(base), -2.0 * i / rope_dim);
          const double c = std::cos(theta), s = std::sin(theta);
          const double e0 = xi[2 * i] * c - xi[2 * i + 1] * s;
          const double e1 = xi[2 * i] * s + xi[2 * i + 1] * c;
          const double tol = (std::fabs(xi[2 * i]) + std::fabs(xi[2 * i + 1])) *
                             ((i + 2) * std::ldexp(1.0, -23) * theta + 1e-6);
          ASSERT_NEAR(yi[2 * i], e0, tol) << "t " << t << " pair " << i;
          ASSERT_NEAR(yi[2 * i + 1], e1, tol) << "t " << t << " pair " << i;
          if (pos[t] == 0) {
            ASSERT_EQ(yi[2 * i], xi[2 * i]);
          }
        }
      }
    }
  }
}

// The pooled Add is the plain Add split by elements: bit-identical for any
// thread count, including sizes above and below the parallel threshold.
TEST(ElementwiseTest, PooledAddMatchesPlainAdd) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  ThreadPool pool2(2);
  for (int64_t n : {int64_t{1}, int64_t{577}, int64_t{64 * 576 + 3}}) {
    std::vector<float> x(n), y(n);
    for (auto& v : x) v = dist(rng);
    for (auto& v : y) v = dist(rng);
    std::vector<float> want = x;
    Add(want.data(), y.data(), n);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      std::vector<float> got = x;
      Add(got.data(), y.data(), n, pool);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "n " << n << " i " << i;
    }
  }
}

// The log-softmax normalizer of logits rows (vocabulary-sized and odd
// lengths, NaN and -inf entries, all -inf) against a double-precision sum.
TEST(ElementwiseTest, LogSoftmaxNormalizerMatchesExactSum) {
  std::mt19937 rng(9);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{49152}, int64_t{49155}}) {
    std::vector<float> x = RandomFloats(rng, n, -30, 12);
    if (n > 20) {
      x[3] = std::nanf("");
      x[5] = -inf;
      x[n - 1] = 14.0f;  // the max in the masked tail
    }
    double max = -inf;
    for (float v : x) {
      if (!std::isnan(v)) max = std::max(max, static_cast<double>(v));
    }
    double exact = 0;
    for (float v : x) {
      if (!std::isnan(v)) exact += std::exp(static_cast<double>(v) - max);
    }
    for (Isa isa : AvailableIsas()) {
      SoftmaxNormalizer got = LogSoftmaxNormalizer(x.data(), n, isa);
      EXPECT_EQ(got.max, static_cast<float>(max)) << IsaName(isa) << " n " << n;
      EXPECT_NEAR(got.sum, exact, 1e-6 * exact) << IsaName(isa) << " n " << n;
      SoftmaxNormalizer again = LogSoftmaxNormalizer(x.data(), n, isa);
      EXPECT_EQ(again.sum, got.sum);  // deterministic
    }
  }
  std::vector<float> none(40, -inf);
  for (Isa isa : AvailableIsas()) {
    SoftmaxNormalizer got = LogSoftmaxNormalizer(none.data(), 40, isa);
    EXPECT_EQ(got.max, -inf);
    EXPECT_EQ(got.sum, 0.0);
  }
}

}  // namespace
}  // namespace tandem::kernels
