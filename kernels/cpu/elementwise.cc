// RmsNorm, SiluMul and Add: plain loops over contiguous f32 rows (the
// reference twins), and the ISA-dispatched overloads of RmsNorm and SiluMul
// that run the AVX-512 bodies (elementwise_avx512.cc) split over the pool.
// Any size is valid.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise_avx512.h"
#include "kernels/kernels.h"

namespace tandem::kernels {
namespace {

// Elements below which a call stays on the calling thread: the hand-off to
// the pool costs more than the work.
constexpr int64_t kMinParallelElems = 1 << 15;

bool UsePool(ThreadPool* pool, int64_t elems) {
  return pool != nullptr && pool->num_threads() > 1 && elems >= kMinParallelElems;
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * dim;
    float* oi = out + i * dim;
    float sum_sq = 0.0f;
    for (int64_t j = 0; j < dim; ++j) sum_sq += xi[j] * xi[j];
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
    for (int64_t j = 0; j < dim; ++j) oi[j] = xi[j] * inv_rms * weight[j];
  }
}

void SiluMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void RmsNorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out,
             Isa isa, ThreadPool* pool) {
  const bool simd = ClampIsa(isa) == Isa::kAvx512;
  auto rows = [&](int, int64_t begin, int64_t end) {
    if (simd) {
      RmsNormRowsAvx512(x + begin * dim, weight, end - begin, dim, eps, out + begin * dim);
    } else {
      RmsNorm(x + begin * dim, weight, end - begin, dim, eps, out + begin * dim);
    }
  };
  if (!UsePool(pool, n * dim)) {
    if (n > 0) rows(0, 0, n);
    return;
  }
  pool->ParallelFor(n, std::max<int64_t>(1, kMinParallelElems / 2 / std::max<int64_t>(dim, 1)),
                    rows);
}

void SiluMul(float* gate, const float* up, int64_t n, Isa isa, ThreadPool* pool) {
  const bool simd = ClampIsa(isa) == Isa::kAvx512;
  auto range = [&](int, int64_t begin, int64_t end) {
    if (simd) {
      SiluMulAvx512(gate + begin, up + begin, end - begin);
    } else {
      SiluMul(gate + begin, up + begin, end - begin);
    }
  };
  if (!UsePool(pool, n)) {
    if (n > 0) range(0, 0, n);
    return;
  }
  pool->ParallelFor(n, kMinParallelElems / 2, range);
}

SoftmaxNormalizer LogSoftmaxNormalizer(const float* x, int64_t n) {
  auto key = [](float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; };
  SoftmaxNormalizer out;
  out.max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) out.max = std::max(out.max, key(x[i]));
  if (!std::isfinite(out.max)) return out;
  // Terms in float (exp in float is several times cheaper and exact to an
  // ulp, while x - max is exact), accumulated in double.
  for (int64_t i = 0; i < n; ++i) out.sum += std::exp(key(x[i]) - out.max);
  return out;
}

SoftmaxNormalizer LogSoftmaxNormalizer(const float* x, int64_t n, Isa isa) {
  if (ClampIsa(isa) == Isa::kAvx512) return LogSoftmaxNormalizerAvx512(x, n);
  return LogSoftmaxNormalizer(x, n);
}

void Add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void Add(float* x, const float* y, int64_t n, ThreadPool* pool) {
  auto range = [&](int, int64_t begin, int64_t end) { Add(x + begin, y + begin, end - begin); };
  if (!UsePool(pool, n)) {
    if (n > 0) range(0, 0, n);
    return;
  }
  pool->ParallelFor(n, kMinParallelElems / 2, range);
}

}  // namespace tandem::kernels
