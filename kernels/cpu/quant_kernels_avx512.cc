// AVX-512 (F/BW/VL/VNNI) kernels of QuantKernels.
//
// Numerics: for every output, with isum_b the block's integer dot (exact in
// int32) and blocks taken in order b = 0 .. nb-1,
//   acc  = fma(float(isum_b), dw·dx, acc)      macc = fma(m, s_b, macc)  (Q4_1)
//   y    = acc + macc.
// The float work is vectorized across outputs (16 per zmm, one output per
// lane), so no lane depends on another and each output's bits are the same
// whatever the tile shape, batch size or thread count. Compiled with
// -ffp-contract=off so that only the explicit fmas above are fused. Versus
// the scalar reference the results differ by fp32 rounding only.
//
// Two tile shapes produce the same bits:
//  - batched (>= kMinBatchedX activation rows): lanes are 16 activation rows.
//    Activations are repacked once per call into groups of 16 whose 4-byte
//    quant groups are interleaved ([j][lane][4]) and offset to u8 (x + 128);
//    weight rows are unpacked once per 64-row chunk to s8 with the per-block
//    correction -128·Σw, so one vpdpbusd with a broadcast weight dword feeds
//    16 outputs. A micro tile holds kMicroRows2 weight rows × 2 groups.
//  - matvec (fewer rows): lanes are 16 weight rows; each row's block dot runs
//    on 256 bits and 16 of them are reduced to one zmm of isums.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/quant_kernels.h"
#include "kernels/cpu/quant_tile_simd.h"

namespace tandem::kernels {
namespace {

// Activation rows below which a partial group of 16 runs as matvecs.
constexpr int64_t kMinBatchedX = 6;
// Weight rows unpacked at a time (stays in L2 while all groups stream past).
constexpr int64_t kChunkRows = 64;
// Micro tile: kMicroGroups groups of 16 activation rows × kMicroRows2 weight
// rows, or (for a last odd group) 1 group × kMicroRows1 weight rows; sized to
// keep 2·rows·groups accumulators in the 32 zmm registers.
constexpr int kMicroGroups = 2;
constexpr int kMicroRows2 = 6;
constexpr int kMicroRows1 = 12;

// Weight policies: a block's 32 weights as s8 in element order.
struct Q8_0Avx512 {
  using Block = gguf::BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kSigned = true;
  static __m256i Weights(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};

struct Q4_0Avx512 {
  using Block = gguf::BlockQ4_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kSigned = true;
  static __m256i Weights(const Block& b) {
    return _mm256_sub_epi8(UnpackNibbles(b.qs), _mm256_set1_epi8(8));
  }
};

struct Q4_1Avx512 {
  using Block = gguf::BlockQ4_1;
  static constexpr bool kHasMin = true;
  static constexpr bool kSigned = false;
  static __m256i Weights(const Block& b) { return UnpackNibbles(b.qs); }
};

template <class Block>
float BlockMin(const Block& b) {
  if constexpr (requires { b.m; }) {
    return HalfToFloat(b.m);
  } else {
    return 0.0f;
  }
}

// One weight block unpacked for the batched tiles.
struct UnpackedBlock {
  int8_t q[32];
  int32_t corr;  // -128 · Σ q: removes the +128 offset of the activations
  float d;
  float m;
  int32_t pad;
};
static_assert(sizeof(UnpackedBlock) == 48);

// 16 activation rows × one block, interleaved for vpdpbusd.
struct alignas(64) PackedXBlock {
  uint8_t q[8][16][4];  // q[j][lane][k] = x[lane].qs[4j + k] + 128
  float d[16];
  float s[16];
};
static_assert(sizeof(PackedXBlock) == 640);

// Permutation indices of PackGroup's 16 × 8 dword transpose (see there).
struct PackIndices {
  alignas(64) int32_t s1[2][16];
  alignas(64) int32_t s2[2][16];
  alignas(64) int32_t s3[2][16];
  PackIndices() {
    for (int h = 0; h < 2; ++h) {
      for (int jj = 0; jj < 4; ++jj) {
        for (int r = 0; r < 4; ++r) {
          s1[h][jj * 4 + r] = r < 2 ? r * 8 + 4 * h + jj : 16 + (r - 2) * 8 + 4 * h + jj;
        }
      }
      for (int jj = 0; jj < 2; ++jj) {
        for (int r = 0; r < 8; ++r) {
          s2[h][jj * 8 + r] = r < 4 ? (2 * h + jj) * 4 + r : 16 + (2 * h + jj) * 4 + (r - 4);
        }
      }
      for (int l = 0; l < 16; ++l) s3[h][l] = l < 8 ? h * 8 + l : 16 + h * 8 + (l - 8);
    }
  }
};

// Packs x[0 .. num_x) (num_x <= 16) of one group; lanes past num_x are zero
// (quants 0x80, d = s = 0). The quants are a 16 (lanes) × 8 (dwords)
// transpose done with three rounds of two-source permutes:
//  z[k]    = rows 2k, 2k+1 (8 dwords each);
//  u[m][a] = rows 4m .. 4m+3, dwords 4a .. 4a+3       (lane jj·4 + r);
//  v[p][a][b] = rows 8p .. 8p+7, dwords 4a+2b, +1     (lane jj·8 + r);
//  t[j]    = all 16 rows, dword j                     (lane l).
void PackGroup(const BlockQ8A* x, int64_t num_x, int64_t nb, PackedXBlock* out) {
  static const PackIndices kIdx;
  const __m512i i1[2] = {_mm512_load_si512(kIdx.s1[0]), _mm512_load_si512(kIdx.s1[1])};
  const __m512i i2[2] = {_mm512_load_si512(kIdx.s2[0]), _mm512_load_si512(kIdx.s2[1])};
  const __m512i i3[2] = {_mm512_load_si512(kIdx.s3[0]), _mm512_load_si512(kIdx.s3[1])};
  const __m512i bias = _mm512_set1_epi32(static_cast<int32_t>(0x80808080u));
  for (int64_t b = 0; b < nb; ++b) {
    PackedXBlock& p = out[b];
    __m256i rows[16];
    for (int l = 0; l < 16; ++l) {
      rows[l] = l < num_x
                    ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[l * nb + b].qs))
                    : _mm256_setzero_si256();
      p.d[l] = l < num_x ? x[l * nb + b].d : 0.0f;
      p.s[l] = l < num_x ? x[l * nb + b].s : 0.0f;
    }
    __m512i z[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(rows[2 * k]), rows[2 * k + 1], 1);
    }
    __m512i u[4][2];
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
#pragma GCC unroll 2
      for (int a = 0; a < 2; ++a) u[m][a] = _mm512_permutex2var_epi32(z[2 * m], i1[a], z[2 * m + 1]);
    }
    __m512i v[2][2][2];
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
#pragma GCC unroll 2
      for (int a = 0; a < 2; ++a) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          v[q][a][h] = _mm512_permutex2var_epi32(u[2 * q][a], i2[h], u[2 * q + 1][a]);
        }
      }
    }
#pragma GCC unroll 2
    for (int a = 0; a < 2; ++a) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
        for (int c = 0; c < 2; ++c) {
          const __m512i t = _mm512_permutex2var_epi32(v[0][a][h], i3[c], v[1][a][h]);
          _mm512_store_si512(p.q[4 * a + 2 * h + c], _mm512_xor_si512(t, bias));
        }
      }
    }
  }
}

template <class P>
void UnpackRows(const uint8_t* w, int64_t row_bytes, int64_t num_rows, int64_t nb,
                UnpackedBlock* out) {
  using Block = typename P::Block;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t r = 0; r < num_rows; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i q = P::Weights(row[b]);
      // Σ q = Σ (q ^ 0x80) - 32 · 128 (psadbw sums unsigned bytes).
      __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(q, bias), _mm256_setzero_si256());
      __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
      s2 = _mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2));
      const int32_t sum = static_cast<int32_t>(_mm_cvtsi128_si32(s2)) - 32 * 128;
      UnpackedBlock& u = out[r * nb + b];
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u.q), q);
      u.corr = -128 * sum;
      u.d = HalfToFloat(row[b].d);
      u.m = BlockMin(row[b]);
      u.pad = 0;
    }
  }
}

inline __m512i BroadcastDword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// R weight rows × G groups of 16 activation rows over all nb blocks.
// y[(g·16 + l) · ldy + r] for lanes l < valid[g]. The loops over r, g and j
// must be fully unrolled (GCC's -O2 does not) so that the R·G integer sums
// and float accumulators live in zmm registers. The Q4_1 min term runs in a
// second pass over the blocks so that the first pass needs only 2·R·G
// accumulators; it is the same sequence of fmas as a fused pass, so the bits
// match the matvec tiles.
template <bool kHasMin, int R, int G>
void MicroBatched(const UnpackedBlock* w, int64_t nb, const PackedXBlock* x, const int* valid,
                  float* y, int64_t ldy) {
  __m512 acc[R][G];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m512i isum[R][G];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512i corr = _mm512_set1_epi32(w[r * nb + b].corr);
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) isum[r][g] = corr;
    }
#pragma GCC unroll 16
    for (int j = 0; j < 8; ++j) {
      __m512i xv[G];
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) xv[g] = _mm512_load_si512(x[g * nb + b].q[j]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i wv = BroadcastDword(w[r * nb + b].q + 4 * j);
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) isum[r][g] = _mm512_dpbusd_epi32(isum[r][g], xv[g], wv);
      }
    }
    __m512 dx[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) dx[g] = _mm512_load_ps(x[g * nb + b].d);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 dw = _mm512_set1_ps(w[r * nb + b].d);
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) {
        acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][g]), _mm512_mul_ps(dw, dx[g]),
                                    acc[r][g]);
      }
    }
  }
  if constexpr (kHasMin) {
    __m512 macc[R][G];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) macc[r][g] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m512 sx[G];
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) sx[g] = _mm512_load_ps(x[g * nb + b].s);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 mw = _mm512_set1_ps(w[r * nb + b].m);
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) macc[r][g] = _mm512_fmadd_ps(mw, sx[g], macc[r][g]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_add_ps(acc[r][g], macc[r][g]);
    }
  }
  // Transpose-free store: each lane is one activation row, each r a column.
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) {
    alignas(64) float lanes[R][16];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) _mm512_store_ps(lanes[r], acc[r][g]);
    for (int l = 0; l < valid[g]; ++l) {
      float* out = y + (g * 16 + l) * ldy;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) out[r] = lanes[r][l];
    }
  }
}

// MicroBatched with R = rr (1 <= rr <= kMax) chosen at run time.
template <bool kHasMin, int G, int kMax>
void MicroBatchedR(int rr, const UnpackedBlock* w, int64_t nb, const PackedXBlock* x,
                   const int* valid, float* y, int64_t ldy) {
  if constexpr (kMax > 1) {
    if (rr < kMax) return MicroBatchedR<kHasMin, G, kMax - 1>(rr, w, nb, x, valid, y, ldy);
  }
  MicroBatched<kHasMin, kMax, G>(w, nb, x, valid, y, ldy);
}

// num_x activation rows (any count; the last group is padded).
template <class P>
void TileBatched(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8A* x,
                 int64_t num_x, int64_t nb, float* y, int64_t ldy) {
  const int64_t groups = (num_x + 15) / 16;
  // Per thread, grown to the largest call and reused.
  thread_local std::vector<PackedXBlock> xp;
  thread_local std::vector<UnpackedBlock> wu;
  if (static_cast<int64_t>(xp.size()) < groups * nb) xp.resize(groups * nb);
  if (static_cast<int64_t>(wu.size()) < kChunkRows * nb) wu.resize(kChunkRows * nb);
  std::vector<int> valid(groups);
  for (int64_t g = 0; g < groups; ++g) {
    valid[g] = static_cast<int>(std::min<int64_t>(16, num_x - g * 16));
    PackGroup(x + g * 16 * nb, valid[g], nb, xp.data() + g * nb);
  }
  for (int64_t r0 = 0; r0 < num_rows; r0 += kChunkRows) {
    const int64_t rows = std::min(kChunkRows, num_rows - r0);
    UnpackRows<P>(w + r0 * row_bytes, row_bytes, rows, nb, wu.data());
    for (int64_t g = 0; g < groups; g += kMicroGroups) {
      const PackedXBlock* xg = xp.data() + g * nb;
      float* yg = y + g * 16 * ldy + r0;
      if (groups - g >= 2) {
        for (int64_t r = 0; r < rows; r += kMicroRows2) {
          const int rr = static_cast<int>(std::min<int64_t>(kMicroRows2, rows - r));
          MicroBatchedR<P::kHasMin, 2, kMicroRows2>(rr, wu.data() + r * nb, nb, xg, &valid[g],
                                                    yg + r, ldy);
        }
      } else {
        for (int64_t r = 0; r < rows; r += kMicroRows1) {
          const int rr = static_cast<int>(std::min<int64_t>(kMicroRows1, rows - r));
          MicroBatchedR<P::kHasMin, 1, kMicroRows1>(rr, wu.data() + r * nb, nb, xg, &valid[g],
                                                    yg + r, ldy);
        }
      }
    }
  }
}

// One block's term for 16 output lanes of activation row xb: acc +=
// float(isum)·(dw·dx), and for Q4_1 macc += m·s (the matvec tiles' order).
template <bool kHasMin>
inline void AccumulateBlock(__m512i isum, __m512 dw, __m512 mw, const BlockQ8A& xb, __m512& acc,
                            __m512& macc) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(xb.d)), acc);
  if constexpr (kHasMin) macc = _mm512_fmadd_ps(mw, _mm512_set1_ps(xb.s), macc);
}

// y[c * ldy + lane] = acc[c] + macc[c] for the lanes in `mask`, c < C.
template <int C>
inline void StoreLanes(const __m512* acc, const __m512* macc, __mmask16 mask, float* y,
                       int64_t ldy) {
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy, mask, _mm512_add_ps(acc[c], macc[c]));
}

// Up to 16 weight rows (lanes) × C activation rows. Each weight block is
// unpacked (and its d, m gathered) once and dotted with the C rows' blocks,
// so a few activation rows (a speculative verification, a small batch) cost
// much less than C separate matvecs; per lane the float operations are the
// same as with C = 1.
template <class P, int C>
void MatvecRows16(const uint8_t* w, int64_t row_bytes, int rows, const BlockQ8A* x, int64_t nb,
                  float* y, int64_t ldy) {
  using Block = typename P::Block;
  const Block* row[16];
  int32_t offs[16];
  for (int r = 0; r < 16; ++r) {
    const int rr = std::min(r, rows - 1);  // padding lanes repeat the last row
    row[r] = reinterpret_cast<const Block*>(w + rr * row_bytes);
    offs[r] = static_cast<int32_t>(rr * row_bytes);
  }
  const __m512i vindex = _mm512_loadu_si512(offs);
  const __mmask16 store_mask = static_cast<__mmask16>((1u << rows) - 1);
  // The 16 rows are 16 interleaved streams; prefetch the next tile's bytes
  // (spread over the blocks) so the hardware prefetchers need not find them.
  const char* next = reinterpret_cast<const char*>(w) + 16 * row_bytes;
  const int64_t lines_per_block = (16 * row_bytes / 64 + nb - 1) / nb;
  __m512 acc[C], macc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    acc[c] = _mm512_setzero_ps();
    macc[c] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t k = 0; k < lines_per_block; ++k) {
      _mm_prefetch(next + (b * lines_per_block + k) * 64, _MM_HINT_T0);
    }
    __m256i wv[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) wv[r] = P::Weights(row[r][b]);
    // d (and m) of the 16 rows' block b: the block's first 4 bytes.
    const __m512i hdr = _mm512_i32gather_epi32(
        vindex, reinterpret_cast<const uint8_t*>(w) + b * sizeof(Block), 1);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hdr));
    __m512 mw = _mm512_setzero_ps();
    if constexpr (P::kHasMin) {
      mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(hdr, 16)));
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const BlockQ8A& xb = x[c * nb + b];
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
      __m256i dots[16];
#pragma GCC unroll 16
      for (int r = 0; r < 16; ++r) {
        if constexpr (P::kSigned) {
          dots[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(wv[r]),
                                        _mm256_sign_epi8(xv, wv[r]));
        } else {
          dots[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wv[r], xv);
        }
      }
      const __m512i isum = _mm512_inserti64x4(_mm512_castsi256_si512(ReduceRows8(dots)),
                                              ReduceRows8(dots + 8), 1);
      AccumulateBlock<P::kHasMin>(isum, dw, mw, xb, acc[c], macc[c]);
    }
  }
  StoreLanes<C>(acc, macc, store_mask, y, ldy);
}

// Fewer than kMinBatchedX activation rows: 16 weight rows at a time, all
// activation rows together.
template <class P>
void TileMatvec(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8A* x,
                int64_t num_x, int64_t nb, float* y, int64_t ldy) {
  for (int64_t r0 = 0; r0 < num_rows; r0 += 16) {
    const int rows = static_cast<int>(std::min<int64_t>(16, num_rows - r0));
    const uint8_t* wr = w + r0 * row_bytes;
    float* yr = y + r0;
    WithCount<kMinBatchedX - 1>(num_x, [&]<int C>() {
      MatvecRows16<P, C>(wr, row_bytes, rows, x, nb, yr, ldy);
    });
  }
}

// Packed rows (packed_rows16.h): lanes are 16 weight rows whose block dots
// come out of vpdpbusd already summed per lane. The J weight vectors of a
// block are loaded (and, for 4-bit types, unpacked) once and used for all C
// activation rows; per lane the float operations are those of MatvecRows16.
template <gguf::GgmlType kType>
struct PackedPolicy {
  static constexpr bool kQ4 = kType != gguf::GgmlType::kQ8_0;
  static constexpr bool kHasMin = kType == gguf::GgmlType::kQ4_1;
  static constexpr int64_t kHeader = kHasMin ? 64 : 32;
  static constexpr int32_t kOffset =
      kType == gguf::GgmlType::kQ8_0 ? 128 : (kType == gguf::GgmlType::kQ4_0 ? 8 : 0);
  static constexpr int64_t kBlockBytes = kHeader + (kQ4 ? 4 : 8) * 64;
};

template <gguf::GgmlType kType, int C>
void PackedRows16(const uint8_t* g, int rows, const BlockQ8A* x, int64_t nb, float* y,
                  int64_t ldy) {
  using P = PackedPolicy<kType>;
  const __mmask16 store_mask = static_cast<__mmask16>((1u << rows) - 1);
  __m512 acc[C], macc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    acc[c] = _mm512_setzero_ps();
    macc[c] = _mm512_setzero_ps();
  }
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = g + b * P::kBlockBytes;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb)));
    __m512 mw = _mm512_setzero_ps();
    if constexpr (P::kHasMin) {
      mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32)));
    }
    const uint8_t* q = pb + P::kHeader;
    __m512i wv[8];
    if constexpr (P::kQ4) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512i v = _mm512_loadu_si512(q + 64 * j);
        wv[j] = _mm512_and_si512(v, low4);
        wv[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      }
    } else {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) wv[j] = _mm512_loadu_si512(q + 64 * j);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const BlockQ8A& xb = x[c * nb + b];
      __m512i isum = _mm512_set1_epi32(-P::kOffset * xb.sum);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        int32_t xd;
        std::memcpy(&xd, xb.qs + 4 * j, 4);
        isum = _mm512_dpbusd_epi32(isum, wv[j], _mm512_set1_epi32(xd));
      }
      AccumulateBlock<P::kHasMin>(isum, dw, mw, xb, acc[c], macc[c]);
    }
  }
  StoreLanes<C>(acc, macc, store_mask, y, ldy);
}

// Up to kMaxPackedX activation rows at a time over every 16-row group (the
// 8 weight vectors, 2·8 accumulators and the running sum fit the 32 zmm).
constexpr int64_t kMaxPackedX = 8;
// Batches up to this size take the packed tiles: measured (bench/kernels,
// Zen 4) faster than the batched tiles for the Q4 projections up to 64 rows
// and for the Q8_0 head up to about 32.
constexpr int64_t kMaxPackedBatch = 32;

template <gguf::GgmlType kType>
void PackedTileAvx512(const uint8_t* groups, int64_t num_rows, const BlockQ8A* x, int64_t num_x,
                      int64_t nb, float* y, int64_t ldy) {
  using P = PackedPolicy<kType>;
  for (int64_t r0 = 0; r0 < num_rows; r0 += 16) {
    const int rows = static_cast<int>(std::min<int64_t>(16, num_rows - r0));
    const uint8_t* g = groups + (r0 / 16) * nb * P::kBlockBytes;
    for (int64_t c0 = 0; c0 < num_x; c0 += kMaxPackedX) {
      const BlockQ8A* xc = x + c0 * nb;
      float* yc = y + c0 * ldy + r0;
      WithCount<kMaxPackedX>(num_x - c0, [&]<int C>() {
        PackedRows16<kType, C>(g, rows, xc, nb, yc, ldy);
      });
    }
  }
}

template <class P>
void TileAvx512(const uint8_t* w, int64_t row_bytes, int64_t num_rows, const BlockQ8A* x,
                int64_t num_x, int64_t nb, float* y, int64_t ldy) {
  const int64_t rem = num_x % 16;
  const int64_t batched = num_x - (rem < kMinBatchedX ? rem : 0);
  if (batched > 0) TileBatched<P>(w, row_bytes, num_rows, x, batched, nb, y, ldy);
  if (batched < num_x) {
    TileMatvec<P>(w, row_bytes, num_rows, x + batched * nb, num_x - batched, nb,
                  y + batched * ldy, ldy);
  }
}

float DotF32Avx512(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  }
  if (i < n) {  // masked tail: lanes past n load as 0
    __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i), _mm512_maskz_loadu_ps(mask, b + i),
                           acc1);
  }
  __m512 sum = _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3));
  // Fold through memory: GCC 12's 512->256 extract intrinsics (and
  // _mm512_reduce_add_ps) trip -Wuninitialized inside its own headers.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return HsumPs(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
}

}  // namespace

const QuantKernels& QuantKernelsAvx512() {
  static const QuantKernels k{QuantizeRowSimd,
                              TileAvx512<Q8_0Avx512>,
                              TileAvx512<Q4_0Avx512>,
                              TileAvx512<Q4_1Avx512>,
                              DotF32Avx512,
                              PackedTileAvx512<gguf::GgmlType::kQ8_0>,
                              PackedTileAvx512<gguf::GgmlType::kQ4_0>,
                              PackedTileAvx512<gguf::GgmlType::kQ4_1>,
                              kMaxPackedBatch};
  return k;
}

}  // namespace tandem::kernels
