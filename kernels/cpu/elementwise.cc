// RmsNorm, SiluMul and Add: plain loops over contiguous f32 rows, written so
// the compiler can vectorize them (no aliasing tricks, no branches in the
// element loops). They are a few percent of a forward pass, so they have no
// per-ISA variants; any size is valid.
#include <cmath>

#include "kernels/kernels.h"

namespace tandem::kernels {

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

void Add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace tandem::kernels
