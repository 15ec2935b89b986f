// 256-bit helpers shared by the AVX2 and AVX-512 quantized-dot kernels:
// nibble unpacking, lane reductions and the activation quantizer. Included
// only by quant_kernels_avx2.cc and quant_kernels_avx512.cc, each compiled
// with its own ISA flags; everything here has internal linkage (anonymous
// namespace), so the two copies never merge at link time.
#ifndef TANDEM_KERNELS_CPU_QUANT_TILE_SIMD_H_
#define TANDEM_KERNELS_CPU_QUANT_TILE_SIMD_H_

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/quant_formats.h"
#include "kernels/cpu/block_q8a.h"

namespace tandem::kernels {
namespace {

inline float HsumPs(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// 16 bytes of packed nibbles -> 32 bytes: lanes 0..15 the low nibbles,
// lanes 16..31 the high nibbles (the Q4_0/Q4_1 element order).
inline __m256i UnpackNibbles(const uint8_t* qs) {
  __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  __m256i shifted = _mm256_srlv_epi64(both, _mm256_set_epi64x(4, 4, 0, 0));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// Sums of the 8 lanes of each of v[0..8), in order: lane i = Σ v[i]
// (exact: integer adds).
inline __m256i ReduceRows8(const __m256i* v) {
  __m256i h01 = _mm256_hadd_epi32(v[0], v[1]);
  __m256i h23 = _mm256_hadd_epi32(v[2], v[3]);
  __m256i h45 = _mm256_hadd_epi32(v[4], v[5]);
  __m256i h67 = _mm256_hadd_epi32(v[6], v[7]);
  __m256i q0 = _mm256_hadd_epi32(h01, h23);  // [r0..3 low halves | r0..3 high halves]
  __m256i q1 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),
                          _mm256_permute2x128_si256(q0, q1, 0x31));
}

// f.template operator()<C>() with C = n, for 1 <= n <= kMax (larger n: kMax).
template <int kMax, class F>
inline void WithCount(int64_t n, F&& f) {
  if constexpr (kMax > 1) {
    if (n < kMax) return WithCount<kMax - 1>(n, f);
  }
  f.template operator()<kMax>();
}

// QuantizeRowFn, bit-identical to the reference (same IEEE operations).
inline void QuantizeRowSimd(const float* x, int64_t n, BlockQ8A* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < n / kQ8ABlock; ++b) {
    const float* xb = x + b * kQ8ABlock;
    __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
    __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, abs_mask), _mm256_and_ps(v1, abs_mask)),
                             _mm256_max_ps(_mm256_and_ps(v2, abs_mask), _mm256_and_ps(v3, abs_mask)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float amax = _mm_cvtss_f32(m4);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    int isum = _mm_cvtsi128_si32(s4);
    // packs work per 128-bit lane; the permute restores element order.
    __m256i p16a = _mm256_packs_epi32(i0, i1);
    __m256i p16b = _mm256_packs_epi32(i2, i3);
    __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), p8);
    out[b].d = d;
    out[b].s = d * static_cast<float>(isum);
    out[b].sum = isum;
  }
}

}  // namespace
}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_QUANT_TILE_SIMD_H_
