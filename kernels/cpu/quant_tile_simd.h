// Shared body of the AVX2 quantized-dot kernels (the AVX-512 file uses its
// helpers and QuantizeRowSimd). Included only by quant_kernels_avx2.cc and
// quant_kernels_avx512.cc, each compiled with its own ISA flags; everything
// here has internal linkage (anonymous namespace), so the two copies never
// merge at link time.
//
// `Ops` supplies the one instruction that differs between the ISAs:
//   static __m256i Dpbusd(__m256i acc, __m256i u8, __m256i s8)
// = acc + per-32-bit-lane sums of four u8·s8 products (vpdpbusd on VNNI;
// vpmaddubsw + vpmaddwd on AVX2, exact here because |u8·s8 pair sum| < 2^15).
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

// Weight-type policies. Dot(w, x, init) = init + Σ w·x per lane group.
template <class Ops>
struct Q8_0Simd {
  using Block = gguf::BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset8 = false;
  static __m256i Load(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
  // |w| is a valid u8 (128 for -128) and sign(x, w) cannot overflow because
  // activations are never -128.
  static __m256i Dot(__m256i w, __m256i x, __m256i init) {
    return Ops::Dpbusd(init, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  }
};

template <class Ops>
struct Q4_0Simd {
  using Block = gguf::BlockQ4_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset8 = true;  // Σ (q - 8)·x = Σ q·x - 8 Σ x
  static __m256i Load(const Block& b) { return UnpackNibbles(b.qs); }
  static __m256i Dot(__m256i w, __m256i x, __m256i init) { return Ops::Dpbusd(init, w, x); }
};

template <class Ops>
struct Q4_1Simd {
  using Block = gguf::BlockQ4_1;
  static constexpr bool kHasMin = true;
  static constexpr bool kOffset8 = false;
  static __m256i Load(const Block& b) { return UnpackNibbles(b.qs); }
  static __m256i Dot(__m256i w, __m256i x, __m256i init) { return Ops::Dpbusd(init, w, x); }
};

// R weight rows × C activation rows, all nb blocks. Each (r, c) output runs
// the same sequence of operations whatever R and C are, so results are
// independent of the tiling.
template <class P, class Ops, int R, int C>
void MicroTile(const uint8_t* w, int64_t row_bytes, const BlockQ8A* x, int64_t nb, float* y,
               int64_t ldy) {
  using Block = typename P::Block;
  __m256 acc[R][C];
  float macc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      acc[r][c] = _mm256_setzero_ps();
      macc[r][c] = 0.0f;
    }
  }
  const Block* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w + r * row_bytes);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i xv[C];
    __m256i init[C];
    __m256 dx[C];
    for (int c = 0; c < C; ++c) {
      const BlockQ8A& xb = x[c * nb + b];
      xv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
      dx[c] = _mm256_set1_ps(xb.d);
      if constexpr (P::kOffset8) {
        init[c] = _mm256_sub_epi32(
            _mm256_setzero_si256(),
            Ops::Dpbusd(_mm256_setzero_si256(), _mm256_set1_epi8(8), xv[c]));
      } else {
        init[c] = _mm256_setzero_si256();
      }
    }
    for (int r = 0; r < R; ++r) {
      const Block& wb = rows[r][b];
      __m256i wv = P::Load(wb);
      const __m256 dw = _mm256_set1_ps(HalfToFloat(wb.d));
      for (int c = 0; c < C; ++c) {
        __m256i isum = P::Dot(wv, xv[c], init[c]);
        // dw·dx in one vector multiply: the same IEEE product as the scalar
        // reference's (dw * dx).
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dx[c]), acc[r][c]);
      }
      if constexpr (P::kHasMin) {
        float m = HalfToFloat(wb.m);
        for (int c = 0; c < C; ++c) macc[r][c] += m * x[c * nb + b].s;
      }
    }
  }
  for (int c = 0; c < C; ++c) {
    for (int r = 0; r < R; ++r) y[c * ldy + r] = HsumPs(acc[r][c]) + macc[r][c];
  }
}

template <class P, class Ops, int R>
void MicroTileC(int cc, const uint8_t* w, int64_t row_bytes, const BlockQ8A* x, int64_t nb,
                float* y, int64_t ldy) {
  switch (cc) {
    case 1:
      return MicroTile<P, Ops, R, 1>(w, row_bytes, x, nb, y, ldy);
    case 2:
      return MicroTile<P, Ops, R, 2>(w, row_bytes, x, nb, y, ldy);
    case 3:
      return MicroTile<P, Ops, R, 3>(w, row_bytes, x, nb, y, ldy);
    default:
      return MicroTile<P, Ops, R, 4>(w, row_bytes, x, nb, y, ldy);
  }
}

template <class P, class Ops>
void MicroTileRC(int rr, int cc, const uint8_t* w, int64_t row_bytes, const BlockQ8A* x,
                 int64_t nb, float* y, int64_t ldy) {
  switch (rr) {
    case 1:
      return MicroTileC<P, Ops, 1>(cc, w, row_bytes, x, nb, y, ldy);
    case 2:
      return MicroTileC<P, Ops, 2>(cc, w, row_bytes, x, nb, y, ldy);
    case 3:
      return MicroTileC<P, Ops, 3>(cc, w, row_bytes, x, nb, y, ldy);
    default:
      return MicroTileC<P, Ops, 4>(cc, w, row_bytes, x, nb, y, ldy);
  }
}

// QuantTileFn over any num_rows × num_x: steps of kRowsMatvec × 1 when there
// is one activation row (matvec: more independent weight streams), else
// kRows × kCols (kRows, kCols <= 4).
template <class P, class Ops, int kRows, int kCols, int kRowsMatvec>
void TileBlock(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8A* x,
               int64_t num_x, int64_t nb, float* y, int64_t ldy) {
  const int rstep = num_x == 1 ? kRowsMatvec : kRows;
  for (int64_t c0 = 0; c0 < num_x; c0 += kCols) {
    int cc = static_cast<int>(std::min<int64_t>(kCols, num_x - c0));
    for (int64_t r0 = 0; r0 < num_rows; r0 += rstep) {
      int rr = static_cast<int>(std::min<int64_t>(rstep, num_rows - r0));
      MicroTileRC<P, Ops>(rr, cc, w + r0 * row_bytes, row_bytes, x + c0 * nb, nb,
                          y + c0 * ldy + r0, ldy);
    }
  }
}

// Cache blocks of weight rows × activation rows: a block of weight rows
// (<= 64 × 720 B for the widest Q4_1 row here) stays in L1/L2 while up to 64
// quantized activation rows stream past it.
template <class P, class Ops, int kRows, int kCols, int kRowsMatvec>
void Tile(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8A* x, int64_t num_x,
          int64_t nb, float* y, int64_t ldy) {
  constexpr int64_t kRowBlock = 64, kColBlock = 64;
  for (int64_t rb = 0; rb < num_rows; rb += kRowBlock) {
    const int64_t re = std::min(rb + kRowBlock, num_rows);
    for (int64_t cb = 0; cb < num_x; cb += kColBlock) {
      const int64_t ce = std::min(cb + kColBlock, num_x);
      TileBlock<P, Ops, kRows, kCols, kRowsMatvec>(w + rb * row_bytes, row_bytes, re - rb,
                                                   x + cb * nb, ce - cb, nb, y + cb * ldy + rb,
                                                   ldy);
    }
  }
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
