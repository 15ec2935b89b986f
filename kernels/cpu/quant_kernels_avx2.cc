// AVX2 + FMA + F16C kernels of QuantKernels. Compiled with -mavx2 -mfma
// -mf16c -ffp-contract=off; reached only through QuantKernelsFor() when the
// CPU has them.
//
// Numerics: those of the AVX-512 table. For every output, with isum_b the
// block's integer dot (exact in int32) and blocks in order b = 0 .. nb-1,
//   acc  = fma(float(isum_b), dw·dx, acc)      macc = fma(m, s_b, macc)  (Q4_1)
//   y    = acc + macc.
// The float work runs one output per lane (8 per ymm), so each output's bits
// are the same whatever the tile shape, batch size or thread count.
//
// Two tile shapes produce the same bits; in both the lanes are 8 weight rows:
//  - plain rows: each row's block dot runs on 256 bits (vpmaddubsw +
//    vpmaddwd) and 8 of them are reduced to one ymm of isums;
//  - packed rows (PackRows16, 4-bit types): a 16-row group is two halves of 8
//    lanes whose 4-byte weight groups are already interleaved, so vpmaddubsw
//    against a broadcast activation dword leaves each row's products in its
//    own lane. The 8 groups' int16 pair sums are added in int16 (exact:
//    |sum| <= 8 · 2 · 15 · 127 = 30480 < 2^15) and widened once per block,
//    and the unpacked weights serve up to kPackedCols activation rows. Q8_0
//    has no packed tile here: its u8 weights (0..255) would saturate
//    vpmaddubsw's int16 pair sums, and the sign trick is no cheaper than the
//    plain tile.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/packed_rows16.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cpu/quant_tile_simd.h"

namespace tandem::kernels {
namespace {

// acc + per-32-bit-lane sums of four u8·s8 products; exact while every
// adjacent pair of products sums within int16 (true for all callers:
// |u8| <= 128 against |s8| <= 127).
inline __m256i Dpbusd(__m256i acc, __m256i u8, __m256i s8) {
  const __m256i pairs = _mm256_maddubs_epi16(u8, s8);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

// Weight-type policies for plain rows. Dpbusd(0, Unsigned(w), Signed(x, w))
// gives per-lane partial sums of the block's Σ u·x, with u the weight before
// the offset kOffset is taken off (isum = Σ u·x - kOffset · Σx). Unsigned(w)
// is computed once per weight block, Signed(x, w) per activation row.
struct Q8_0Avx2 {
  using Block = gguf::BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr int32_t kOffset = 0;
  static __m256i Load(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
  // |w| is a valid u8 (128 for -128) and sign(x, w) cannot overflow because
  // activations are never -128.
  static __m256i Unsigned(__m256i w) { return _mm256_abs_epi8(w); }
  static __m256i Signed(__m256i x, __m256i w) { return _mm256_sign_epi8(x, w); }
};

// 4-bit weights: the unpacked nibbles (0..15) are the unsigned operand.
template <class B, bool kMin, int32_t kOff>
struct Nibbles4Avx2 {
  using Block = B;
  static constexpr bool kHasMin = kMin;
  static constexpr int32_t kOffset = kOff;
  static __m256i Load(const Block& b) { return UnpackNibbles(b.qs); }
  static __m256i Unsigned(__m256i w) { return w; }
  static __m256i Signed(__m256i x, __m256i) { return x; }
};
using Q4_0Avx2 = Nibbles4Avx2<gguf::BlockQ4_0, false, 8>;
using Q4_1Avx2 = Nibbles4Avx2<gguf::BlockQ4_1, true, 0>;

// The f16 field `kField` (scale or min) of block b of the 8 rows, as floats.
// Built in registers: 8 scalar stores reloaded as one vector would stall on
// store forwarding once per block.
template <auto kField, class Block>
inline __m256 HalvesOf8Rows(const Block* const* row, int64_t b) {
  const auto h = [&](int r) { return static_cast<short>(row[r][b].*kField); };
  return _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)));
}

// One block's term for 8 output lanes of activation row xb.
template <bool kHasMin>
inline void AccumulateBlock(__m256i isum, __m256 dw, __m256 mw, const BlockQ8A& xb, __m256& acc,
                            __m256& macc) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(xb.d)), acc);
  if constexpr (kHasMin) macc = _mm256_fmadd_ps(mw, _mm256_set1_ps(xb.s), macc);
}

template <int C>
inline void ZeroAccumulators(__m256* acc, __m256* macc) {
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    acc[c] = _mm256_setzero_ps();
    macc[c] = _mm256_setzero_ps();
  }
}

// y[c * ldy + lane] = acc[c] + macc[c] for lanes < rows, c < C.
template <int C>
inline void StoreLanes(const __m256* acc, const __m256* macc, int rows, float* y, int64_t ldy) {
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm256_maskstore_ps(y + c * ldy, mask, _mm256_add_ps(acc[c], macc[c]));
}

// Up to 8 weight rows (lanes) × C activation rows. Each weight block is
// loaded (and unpacked) once for the C rows; per lane the float operations
// are the same for every C.
template <class P, int C>
void PlainRows8(const uint8_t* w, int64_t row_bytes, int rows, const BlockQ8A* x, int64_t nb,
                float* y, int64_t ldy) {
  using Block = typename P::Block;
  const Block* row[8];
  for (int r = 0; r < 8; ++r) {  // padding lanes repeat the last row
    row[r] = reinterpret_cast<const Block*>(w + std::min(r, rows - 1) * row_bytes);
  }
  __m256 acc[C], macc[C];
  ZeroAccumulators<C>(acc, macc);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wv[8], uv[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      wv[r] = P::Load(row[r][b]);
      uv[r] = P::Unsigned(wv[r]);
    }
    const __m256 dw = HalvesOf8Rows<&Block::d>(row, b);
    __m256 mw = _mm256_setzero_ps();
    if constexpr (P::kHasMin) mw = HalvesOf8Rows<&Block::m>(row, b);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const BlockQ8A& xb = x[c * nb + b];
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
      __m256i dots[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) dots[r] = Dpbusd(_mm256_setzero_si256(), uv[r], P::Signed(xv, wv[r]));
      __m256i isum = ReduceRows8(dots);
      if constexpr (P::kOffset != 0) {
        isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(P::kOffset * xb.sum));
      }
      AccumulateBlock<P::kHasMin>(isum, dw, mw, xb, acc[c], macc[c]);
    }
  }
  StoreLanes<C>(acc, macc, rows, y, ldy);
}

// Activation rows per pass of the plain tile.
constexpr int kPlainCols = 4;

template <class P>
void TileAvx2(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8A* x,
              int64_t num_x, int64_t nb, float* y, int64_t ldy) {
  for (int64_t r0 = 0; r0 < num_rows; r0 += 8) {
    const int rows = static_cast<int>(std::min<int64_t>(8, num_rows - r0));
    for (int64_t c0 = 0; c0 < num_x; c0 += kPlainCols) {
      WithCount<kPlainCols>(num_x - c0, [&]<int C>() {
        PlainRows8<P, C>(w + r0 * row_bytes, row_bytes, rows, x + c0 * nb, nb, y + c0 * ldy + r0,
                         ldy);
      });
    }
  }
}

template <gguf::GgmlType kType>
struct PackedPolicy {
  static constexpr bool kHasMin = kType == gguf::GgmlType::kQ4_1;
  static constexpr int64_t kHeader = kHasMin ? 64 : 32;
  static constexpr int32_t kOffset = kType == gguf::GgmlType::kQ4_0 ? 8 : 0;
  static constexpr int64_t kBlockBytes = kHeader + 4 * 64;
};

// One half (8 rows, lanes < rows valid) of a packed 16-row group × C
// activation rows. The Q4_1 min term runs in a second pass over the blocks so
// that the first needs only C accumulators beside the 8 weight vectors; it is
// the same sequence of fmas as a fused pass.
template <gguf::GgmlType kType, int C>
void PackedRows8(const uint8_t* g, int half, int rows, const BlockQ8A* x, int64_t nb, float* y,
                 int64_t ldy) {
  using P = PackedPolicy<kType>;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256 acc[C], macc[C];
  ZeroAccumulators<C>(acc, macc);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = g + b * P::kBlockBytes;
    const __m256 dw =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 16 * half)));
    const uint8_t* q = pb + P::kHeader + 32 * half;
    __m256i wv[8];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * j));
      wv[j] = _mm256_and_si256(v, low4);
      wv[j + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const BlockQ8A& xb = x[c * nb + b];
      __m256i s16 = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        int32_t xd;
        std::memcpy(&xd, xb.qs + 4 * j, 4);
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(wv[j], _mm256_set1_epi32(xd)));
      }
      __m256i isum = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
      if constexpr (P::kOffset != 0) {
        isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(P::kOffset * xb.sum));
      }
      AccumulateBlock<false>(isum, dw, dw, xb, acc[c], macc[c]);
    }
  }
  if constexpr (P::kHasMin) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* pb = g + b * P::kBlockBytes;
      const __m256 mw =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 32 + 16 * half)));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) macc[c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x[c * nb + b].s), macc[c]);
    }
  }
  StoreLanes<C>(acc, macc, rows, y, ldy);
}

// Activation rows per pass of the packed tile. Measured (bench/kernels, a
// 2-core AVX2 EPYC): 8 is at least as fast as 2, 4 or 6; a few of the 8
// weight vectors then live in L1 rather than in registers, which costs less
// than unpacking them again for every pass.
constexpr int kPackedCols = 8;

template <gguf::GgmlType kType>
void PackedTileAvx2(const uint8_t* groups, int64_t num_rows, const BlockQ8A* x, int64_t num_x,
                    int64_t nb, float* y, int64_t ldy) {
  using P = PackedPolicy<kType>;
  for (int64_t r0 = 0; r0 < num_rows; r0 += 16) {
    const uint8_t* g = groups + (r0 / 16) * nb * P::kBlockBytes;
    for (int half = 0; half < 2; ++half) {
      const int rows = static_cast<int>(std::min<int64_t>(8, num_rows - r0 - 8 * half));
      if (rows <= 0) break;
      for (int64_t c0 = 0; c0 < num_x; c0 += kPackedCols) {
        WithCount<kPackedCols>(num_x - c0, [&]<int C>() {
          PackedRows8<kType, C>(g, half, rows, x + c0 * nb, nb, y + c0 * ldy + r0 + 8 * half, ldy);
        });
      }
    }
  }
}

float DotF32Avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float acc = HsumPs(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) acc = std::fma(a[i], b[i], acc);
  return acc;
}

// DotF32Avx2 for three b rows at once: per output the same operations in the
// same order (four accumulators over 32-float steps, then 8-float steps into
// the first, the same reduction, an fma tail), so the bits match.
void DotF32x3Avx2(const float* a, const float* b, int64_t ldb, int64_t n, float* out) {
  __m256 acc[3][4];
#pragma GCC unroll 3
  for (int c = 0; c < 3; ++c) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) acc[c][k] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256 av = _mm256_loadu_ps(a + i + 8 * k);
#pragma GCC unroll 3
      for (int c = 0; c < 3; ++c) {
        acc[c][k] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + c * ldb + i + 8 * k), acc[c][k]);
      }
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 av = _mm256_loadu_ps(a + i);
#pragma GCC unroll 3
    for (int c = 0; c < 3; ++c) {
      acc[c][0] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + c * ldb + i), acc[c][0]);
    }
  }
#pragma GCC unroll 3
  for (int c = 0; c < 3; ++c) {
    float s = HsumPs(_mm256_add_ps(_mm256_add_ps(acc[c][0], acc[c][1]),
                                   _mm256_add_ps(acc[c][2], acc[c][3])));
    for (int64_t t = i; t < n; ++t) s = std::fma(a[t], b[c * ldb + t], s);
    out[c] = s;
  }
}

}  // namespace

const QuantKernels& QuantKernelsAvx2() {
  // The packed tiles serve every batch size: per 8 rows they do the least
  // work per activation row (no cross-lane reduction).
  static const QuantKernels k{QuantizeRowSimd,
                              TileAvx2<Q8_0Avx2>,
                              TileAvx2<Q4_0Avx2>,
                              TileAvx2<Q4_1Avx2>,
                              DotF32Avx2,
                              nullptr,
                              PackedTileAvx2<gguf::GgmlType::kQ4_0>,
                              PackedTileAvx2<gguf::GgmlType::kQ4_1>,
                              INT64_MAX,
                              DotF32x3Avx2};
  return k;
}

}  // namespace tandem::kernels
