// AVX-512 attention for one (token, KV head) item: online softmax over the
// sequence's key blocks with all `group` query heads of the KV head processed
// together, so each K and V row is loaded (and widened from f16 with
// vcvtph2ps) once and used by every head straight from registers; there is no
// widened copy of the block in memory.
//
// Per key block, in chunks of 16 keys:
//  - scores: per key and head a 16-lane partial dot (head_dim / 16 fmas),
//    then one transposing reduction tree turns the 16 keys' partials into one
//    zmm of 16 scores;
//  - softmax: running max / sum per head, vector exp;
//  - V: acc[head] = acc[head] · corr + Σ_j p[head][j] · v_j, head_dim / 16
//    zmm accumulators per head.
// Every score and output is a fixed sequence of operations on its own item's
// inputs (block boundaries come from positions), so results do not depend on
// the batch, the thread count or the other keys in a chunk. Shapes outside
// the instantiated (head_dim, group) set run AttendItemAvx2.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/exp_avx512.h"
#include "kernels/cpu/paged_attention_item.h"

namespace tandem::kernels {
namespace {

// Lane j of the result = Σ of the 16 lanes of v[j], each by a fixed tree.
inline __m512 Reduce16(const __m512* v) {
  __m512 s1[8], s2[4], s3[2];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {  // 256-bit halves: v[2k] | v[2k+1], 8 partials each
    s1[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),
                          _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xee));
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {  // 128-bit lanes: v[4k] .. v[4k+3], 4 partials each
    s2[k] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * k], s1[2 * k + 1], 0x88),
                          _mm512_shuffle_f32x4(s1[2 * k], s1[2 * k + 1], 0xdd));
  }
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {  // 128-bit lane i: v[8k+i], v[8k+4+i], 2 partials each
    s3[k] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], 0x44),
                          _mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], 0xee));
  }
  // Lane 4i + t = Σ v[4t + i]; the permute puts Σ v[j] in lane j.
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], 0x88),
                                 _mm512_shuffle_ps(s3[0], s3[1], 0xdd));
  const __m512i idx =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(idx, r);
}

inline float HsumPs512(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  // Fixed tree: 16 -> 8 -> 4 -> 2 -> 1.
  for (int w = 8; w >= 1; w /= 2) {
    for (int i = 0; i < w; ++i) lanes[i] += lanes[i + w];
  }
  return lanes[0];
}

// 16 f32 values of a K/V row starting at element d.
template <bool kF16>
inline __m512 LoadRow16(const void* row, int64_t d) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + d)));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(row) + d);
  }
}

// The element type of a K/V cache row.
template <bool kF16>
using KvElem = std::conditional_t<kF16, uint16_t, float>;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Points kf[jj] (jj < jn) at the f32 K rows of keys j0 + jj: f16 rows are
// widened once each into kbuf (16·NV floats per row), f32 rows are read in
// place, so the per-head loop keeps only 16 partials + NV query vectors live
// instead of G × 16 partials.
template <bool kF16, int NV>
[[gnu::always_inline]] inline void ChunkKeyRows(const KvElem<kF16>* krows, int64_t row_stride,
                                                int64_t j0, int jn, float* kbuf,
                                                const float* (&kf)[16]) {
  constexpr int64_t hd = 16 * NV;
  for (int jj = 0; jj < jn; ++jj) {
    const KvElem<kF16>* krow = krows + (j0 + jj) * row_stride;
    if constexpr (kF16) {
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) {
        _mm512_store_ps(kbuf + jj * hd + 16 * i, LoadRow16<kF16>(krow, 16 * i));
      }
      kf[jj] = kbuf + jj * hd;
    } else {
      kf[jj] = krow;
    }
  }
}

// part[jj] = the 16-lane partial dot of the query qv with K row kf[jj] for
// jj < jn, zero past it.
template <int NV>
[[gnu::always_inline]] inline void ChunkPartials(const __m512 (&qv)[NV],
                                                 const float* const (&kf)[16], int jn,
                                                 __m512 (&part)[16]) {
  if (jn == 16) {
#pragma GCC unroll 16
    for (int jj = 0; jj < 16; ++jj) {
      __m512 t = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kf[jj]));
#pragma GCC unroll 8
      for (int i = 1; i < NV; ++i) t = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(kf[jj] + 16 * i), t);
      part[jj] = t;
    }
  } else {
    for (int jj = 0; jj < 16; ++jj) {
      if (jj >= jn) {
        part[jj] = _mm512_setzero_ps();
        continue;
      }
      __m512 t = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kf[jj]));
#pragma GCC unroll 8
      for (int i = 1; i < NV; ++i) t = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(kf[jj] + 16 * i), t);
      part[jj] = t;
    }
  }
}

// The scaled scores of one block's nk keys (rows from krows) for every head,
// 16 keys at a time, into s[h · bs16 + j] (lanes past nk: -inf, so exp gives
// 0); vmax[h] = their lane-wise max.
template <bool kF16, int NV, int G>
[[gnu::always_inline]] inline void ScoreBlock(const AttentionItem& item,
                                              const KvElem<kF16>* krows, int64_t nk,
                                              int64_t row_stride, int64_t bs16, __m512 vscale,
                                              float* kbuf, float* s, __m512 (&vmax)[G]) {
  constexpr int64_t hd = 16 * NV;
#pragma GCC unroll 8
  for (int h = 0; h < G; ++h) vmax[h] = _mm512_set1_ps(kNegInf);
  for (int64_t j0 = 0; j0 < nk; j0 += 16) {
    const int jn = static_cast<int>(std::min<int64_t>(16, nk - j0));
    const float* kf[16];
    ChunkKeyRows<kF16, NV>(krows, row_stride, j0, jn, kbuf, kf);
    const __mmask16 valid = static_cast<__mmask16>((1u << jn) - 1);
#pragma GCC unroll 1
    for (int h = 0; h < G; ++h) {
      const float* q = item.q + h * hd;
      __m512 qv[NV];
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) qv[i] = _mm512_loadu_ps(q + 16 * i);
      __m512 part[16];
      ChunkPartials<NV>(qv, kf, jn, part);
      const __m512 sv = _mm512_mask_mul_ps(_mm512_set1_ps(kNegInf), valid, Reduce16(part), vscale);
      vmax[h] = _mm512_max_ps(vmax[h], sv);
      _mm512_storeu_ps(s + h * bs16 + j0, sv);
    }
  }
}

// Online softmax update per head by one block: its scores in s become
// exp(score - m_new) in place, l[h] = l[h] · corr + Σ p, m[h] = m_new and
// acc[h] *= corr, where corr = exp(m_old - m_new) (0 before any key).
template <int NV, int G>
[[gnu::always_inline]] inline void SoftmaxBlock(const __m512 (&vmax)[G], int64_t nk, int64_t bs16,
                                                float* s, float (&m)[G], float (&l)[G],
                                                __m512 (&acc)[G][NV]) {
  float corr[G];
#pragma GCC unroll 8
  for (int h = 0; h < G; ++h) {
    const float m_new = std::max(m[h], _mm512_reduce_max_ps(vmax[h]));
    corr[h] = m[h] == kNegInf ? 0.0f : std::exp(m[h] - m_new);
    const __m512 vm = _mm512_set1_ps(m_new);
    __m512 psum = _mm512_setzero_ps();
    for (int64_t j0 = 0; j0 < nk; j0 += 16) {
      const __m512 p = Exp512(_mm512_sub_ps(_mm512_loadu_ps(s + h * bs16 + j0), vm));
      psum = _mm512_add_ps(psum, p);
      _mm512_storeu_ps(s + h * bs16 + j0, p);
    }
    l[h] = l[h] * corr[h] + HsumPs512(psum);
    m[h] = m_new;
    const __m512 c = _mm512_set1_ps(corr[h]);
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) acc[h][i] = _mm512_mul_ps(acc[h][i], c);
  }
}

// acc[h] += Σ_j p[h][j] · v_j over one block's nk V rows (from vrows), with
// p[h][j] = s[h · bs16 + j]; each V row is loaded once for every head.
template <bool kF16, int NV, int G>
[[gnu::always_inline]] inline void AccumulateV(const KvElem<kF16>* vrows, int64_t nk,
                                               int64_t row_stride, const float* s, int64_t bs16,
                                               __m512 (&acc)[G][NV]) {
  for (int64_t j = 0; j < nk; ++j) {
    const KvElem<kF16>* vrow = vrows + j * row_stride;
    __m512 v[NV];
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) v[i] = LoadRow16<kF16>(vrow, 16 * i);
#pragma GCC unroll 8
    for (int h = 0; h < G; ++h) {
      const __m512 p = _mm512_set1_ps(s[h * bs16 + j]);
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) acc[h][i] = _mm512_fmadd_ps(p, v[i], acc[h][i]);
    }
  }
}

// head_dim = 16·NV, group = G.
template <bool kF16, int NV, int G>
void AttendItemT(const AttentionItem& item, const PagedKvView& cache, float scale) {
  constexpr int64_t hd = 16 * NV;
  const int64_t bs = cache.block_size;
  const int64_t row_stride = static_cast<int64_t>(cache.num_kv_heads) * hd;
  const KvElem<kF16>* kbase = static_cast<const KvElem<kF16>*>(cache.k);
  const KvElem<kF16>* vbase = static_cast<const KvElem<kF16>*>(cache.v);
  // Scores / probabilities of one block: [G][bs rounded up to 16].
  const int64_t bs16 = (bs + 15) / 16 * 16;
  thread_local std::vector<float> sbuf;
  if (static_cast<int64_t>(sbuf.size()) < G * bs16) sbuf.resize(G * bs16);
  float* s = sbuf.data();
  alignas(64) float kbuf[kF16 ? 16 * hd : 1];

  __m512 acc[G][NV];
  float m[G], l[G];
#pragma GCC unroll 8
  for (int h = 0; h < G; ++h) {
    m[h] = kNegInf;
    l[h] = 0.0f;
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) acc[h][i] = _mm512_setzero_ps();
  }
  const __m512 vscale = _mm512_set1_ps(scale);

  for (int64_t start = 0; start < item.num_keys; start += bs) {
    const int64_t block = item.block_table[start / bs];
    const int64_t nk = std::min(bs, item.num_keys - start);
    const int64_t first = (block * bs * cache.num_kv_heads + item.kv_head) * hd;
    __m512 vmax[G];
    ScoreBlock<kF16, NV, G>(item, kbase + first, nk, row_stride, bs16, vscale, kbuf, s, vmax);
    SoftmaxBlock<NV, G>(vmax, nk, bs16, s, m, l, acc);
    AccumulateV<kF16, NV, G>(vbase + first, nk, row_stride, s, bs16, acc);
  }
#pragma GCC unroll 8
  for (int h = 0; h < G; ++h) {
    const __m512 inv = _mm512_set1_ps(1.0f / l[h]);
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) {
      _mm512_storeu_ps(item.out + h * hd + 16 * i, _mm512_mul_ps(acc[h][i], inv));
    }
  }
}

template <bool kF16>
AttentionItemFn Select(int64_t head_dim, int32_t group) {
  if (head_dim == 64) {
    switch (group) {
      case 1: return AttendItemT<kF16, 4, 1>;
      case 2: return AttendItemT<kF16, 4, 2>;
      case 3: return AttendItemT<kF16, 4, 3>;
      case 4: return AttendItemT<kF16, 4, 4>;
      default: return nullptr;
    }
  }
  if (head_dim == 128) {
    switch (group) {
      case 1: return AttendItemT<kF16, 8, 1>;
      case 2: return AttendItemT<kF16, 8, 2>;
      default: return nullptr;
    }
  }
  return nullptr;
}

}  // namespace

AttentionItemFn AttendItemAvx512For(const PagedKvView& cache, int32_t group) {
  AttentionItemFn fn = cache.dtype == KvDtype::kF16 ? Select<true>(cache.head_dim, group)
                                                    : Select<false>(cache.head_dim, group);
  return fn != nullptr ? fn : AttendItemAvx2;
}

}  // namespace tandem::kernels
