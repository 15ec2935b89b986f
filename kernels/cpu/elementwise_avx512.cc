// AVX-512 RmsNorm rows and SiluMul; see elementwise_avx512.h. Compiled with
// -ffp-contract=off: the multiplies and adds below are the only roundings.
#include "kernels/cpu/elementwise_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/exp_avx512.h"

namespace tandem::kernels {

void RmsNormRowsAvx512(const float* x, const float* weight, int64_t n, int64_t dim, float eps,
                       float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * dim;
    float* oi = out + i * dim;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= dim; j += 32) {
      const __m512 a = _mm512_loadu_ps(xi + j), b = _mm512_loadu_ps(xi + j + 16);
      s0 = _mm512_fmadd_ps(a, a, s0);
      s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; j < dim; j += 16) {  // masked tail: lanes past dim load as 0
      const __mmask16 m = dim - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (dim - j)) - 1);
      const __m512 a = _mm512_maskz_loadu_ps(m, xi + j);
      s0 = _mm512_fmadd_ps(a, a, s0);
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_add_ps(s0, s1));
    for (int w = 8; w >= 1; w /= 2) {
      for (int k = 0; k < w; ++k) lanes[k] += lanes[k + w];
    }
    const float inv_rms = 1.0f / std::sqrt(lanes[0] / static_cast<float>(dim) + eps);
    const __m512 inv = _mm512_set1_ps(inv_rms);
    for (j = 0; j < dim; j += 16) {
      const __mmask16 m = dim - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (dim - j)) - 1);
      const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, xi + j), inv),
                                     _mm512_maskz_loadu_ps(m, weight + j));
      _mm512_mask_storeu_ps(oi + j, m, v);
    }
  }
}

void SiluMulAvx512(float* gate, const float* up, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = Exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 v = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)),
                                   _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(gate + i, m, v);
  }
}

SoftmaxNormalizer LogSoftmaxNormalizerAvx512(const float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  auto load = [&](int64_t i) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_mask_loadu_ps(neg_inf, m, x + i);
    // NaN lanes count as -inf (as the reference's RankKey).
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v, neg_inf);
  };
  __m512 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += 16) vmax = _mm512_max_ps(vmax, load(i));
  // Folds go through memory: GCC 12's 512->256 extract intrinsics (and the
  // _mm512_reduce_* helpers) trip -Wuninitialized inside its own headers.
  alignas(64) float fl[16];
  _mm512_store_ps(fl, vmax);
  SoftmaxNormalizer out;
  out.max = fl[0];
  for (int l = 1; l < 16; ++l) out.max = std::max(out.max, fl[l]);
  if (!std::isfinite(out.max)) return out;
  const __m512 shift = _mm512_set1_ps(out.max);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    _mm512_store_ps(fl, Exp512(_mm512_sub_ps(load(i), shift)));  // -inf lanes give 0
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm256_load_ps(fl)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_load_ps(fl + 8)));
  }
  alignas(64) double lanes[16];
  _mm512_store_pd(lanes, lo);
  _mm512_store_pd(lanes + 8, hi);
  double sum = 0.0;
  for (double d : lanes) sum += d;
  out.sum = sum;
  return out;
}

}  // namespace tandem::kernels
