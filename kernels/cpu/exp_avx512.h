// Vector e^x for the AVX-512 kernels (attention softmax, SiLU). Included only
// by files compiled with the AVX-512 flags; internal linkage.
#ifndef TANDEM_KERNELS_CPU_EXP_AVX512_H_
#define TANDEM_KERNELS_CPU_EXP_AVX512_H_

#include <immintrin.h>

namespace tandem::kernels {
namespace {

// e^x per lane; relative error < 3e-7 for x in [-87, 88]; 0 for x < -87
// (including -inf). Same range reduction and polynomial as the
// AVX2 attention kernel's ExpPs: x = n·ln2 + r, |r| <= ln2/2, Taylor to r^7.
inline __m512 Exp512(__m512 x) {
  const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(ok, p, _mm512_castsi512_ps(bits));
}

}  // namespace
}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_EXP_AVX512_H_
