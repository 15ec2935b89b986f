// AVX2 + FMA + F16C attention for one (token, KV head) item: online softmax
// over the sequence's key blocks. Per block: f16 K/V rows are widened once
// (f32 rows are used in place), scores of 8 keys at a time come from 8 dot
// products folded by one horizontal-add tree, exp is a vector polynomial, and
// the V accumulation keeps up to 64 output dims in registers per query head.
// Used for Isa::kAvx2, and for Isa::kAvx512 at shapes the grouped AVX-512
// kernel (paged_attention_avx512.cc) does not instantiate.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/logging.h"
#include "kernels/cpu/paged_attention_item.h"

namespace tandem::kernels {
namespace {

// e^x per lane; relative error < 3e-7 for x in [-87, 88]; 0 for x < -87
// (including -inf).
inline __m256 ExpPs(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  // x = n ln2 + r, |r| <= ln2 / 2; ln2 split in a short high part (exact
  // product with n) and a low correction.
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // Taylor series of e^r to r^7 (truncation < 1e-8 on |r| <= 0.35).
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  return _mm256_andnot_ps(underflow, result);
}

// Lane i of the result = horizontal sum of v[i].
inline __m256 Hsum8(const __m256 v[8]) {
  __m256 t0 = _mm256_hadd_ps(v[0], v[1]);
  __m256 t1 = _mm256_hadd_ps(v[2], v[3]);
  __m256 t2 = _mm256_hadd_ps(v[4], v[5]);
  __m256 t3 = _mm256_hadd_ps(v[6], v[7]);
  __m256 u0 = _mm256_hadd_ps(t0, t1);  // per 128-bit half: sums of v0..v3
  __m256 u1 = _mm256_hadd_ps(t2, t3);  // per 128-bit half: sums of v4..v7
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

inline float HsumPs(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HmaxPs(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 DotVec(const float* a, const float* b, int64_t hd) {
  __m256 acc0 = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
  __m256 acc1 = _mm256_setzero_ps();
  int64_t d = 8;
  for (; d + 16 <= hd; d += 16) {
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc1);
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8), acc0);
  }
  if (d < hd) acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc1);
  return _mm256_add_ps(acc0, acc1);
}

// acc[0, 8 NV) = acc * corr + Σ_j p[j] · v_rows[j][0, 8 NV).
template <int NV>
void AccumulateV(float* acc, float corr, const float* p, const float* const* v_rows, int64_t nk,
                 int64_t d0) {
  __m256 a[NV];
  const __m256 c = _mm256_set1_ps(corr);
  for (int i = 0; i < NV; ++i) a[i] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * i), c);
  for (int64_t j = 0; j < nk; ++j) {
    const __m256 pj = _mm256_broadcast_ss(p + j);
    const float* v = v_rows[j] + d0;
    for (int i = 0; i < NV; ++i) a[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * i), a[i]);
  }
  for (int i = 0; i < NV; ++i) _mm256_storeu_ps(acc + 8 * i, a[i]);
}

void AccumulateVDispatch(int nv, float* acc, float corr, const float* p,
                         const float* const* v_rows, int64_t nk, int64_t d0) {
  switch (nv) {
    case 1: return AccumulateV<1>(acc, corr, p, v_rows, nk, d0);
    case 2: return AccumulateV<2>(acc, corr, p, v_rows, nk, d0);
    case 3: return AccumulateV<3>(acc, corr, p, v_rows, nk, d0);
    case 4: return AccumulateV<4>(acc, corr, p, v_rows, nk, d0);
    case 5: return AccumulateV<5>(acc, corr, p, v_rows, nk, d0);
    case 6: return AccumulateV<6>(acc, corr, p, v_rows, nk, d0);
    case 7: return AccumulateV<7>(acc, corr, p, v_rows, nk, d0);
    default: return AccumulateV<8>(acc, corr, p, v_rows, nk, d0);
  }
}

// Pointers to the rows of keys [0, nk) of `block` for `kv_head`, widening f16
// rows into `buf` ([nk, hd]) first.
void BlockRows(const void* base, const PagedKvView& cache, int64_t block, int32_t kv_head,
               int64_t nk, float* buf, const float** rows) {
  const int64_t hd = cache.head_dim;
  const int64_t row_stride = static_cast<int64_t>(cache.num_kv_heads) * hd;
  const int64_t first = (block * cache.block_size * cache.num_kv_heads + kv_head) * hd;
  if (cache.dtype == KvDtype::kF32) {
    const float* f = static_cast<const float*>(base) + first;
    for (int64_t j = 0; j < nk; ++j) rows[j] = f + j * row_stride;
    return;
  }
  const uint16_t* h = static_cast<const uint16_t*>(base) + first;
  for (int64_t j = 0; j < nk; ++j) {
    const uint16_t* src = h + j * row_stride;
    float* dst = buf + j * hd;
    for (int64_t d = 0; d < hd; d += 8) {
      _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d))));
    }
    rows[j] = dst;
  }
}

}  // namespace

void AttendItemAvx2(const AttentionItem& item, const PagedKvView& cache, float scale) {
  const int64_t hd = cache.head_dim;
  const int64_t bs = cache.block_size;
  const int64_t bs8 = (bs + 7) / 8 * 8;
  const int32_t g = item.group;
  CHECK(hd % 8 == 0, "AttendItemAvx2: head_dim %d not a multiple of 8", hd);
  thread_local std::vector<float> acc, kbuf, vbuf, scores, m, l;
  thread_local std::vector<const float*> krows, vrows;
  acc.assign(g * hd, 0.0f);
  if (static_cast<int64_t>(kbuf.size()) < bs * hd) {
    kbuf.resize(bs * hd);
    vbuf.resize(bs * hd);
  }
  if (static_cast<int64_t>(scores.size()) < bs8) scores.resize(bs8);
  if (static_cast<int64_t>(krows.size()) < bs) {
    krows.resize(bs);
    vrows.resize(bs);
  }
  m.assign(g, -std::numeric_limits<float>::infinity());
  l.assign(g, 0.0f);
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());

  for (int64_t start = 0; start < item.num_keys; start += bs) {
    const int64_t block = item.block_table[start / bs];
    const int64_t nk = std::min(bs, item.num_keys - start);
    BlockRows(cache.k, cache, block, item.kv_head, nk, kbuf.data(), krows.data());
    BlockRows(cache.v, cache, block, item.kv_head, nk, vbuf.data(), vrows.data());
    for (int32_t h = 0; h < g; ++h) {
      const float* q = item.q + h * hd;
      float* s = scores.data();
      __m256 vmax = neg_inf;
      for (int64_t j0 = 0; j0 < nk; j0 += 8) {
        __m256 dots[8];
        for (int jj = 0; jj < 8; ++jj) {
          dots[jj] = j0 + jj < nk ? DotVec(q, krows[j0 + jj], hd) : _mm256_setzero_ps();
        }
        __m256 sv = _mm256_mul_ps(Hsum8(dots), vscale);
        if (j0 + 8 > nk) {  // lanes past the last key: -inf, so exp gives 0
          const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
          const __m256 valid = _mm256_cmp_ps(lane, _mm256_set1_ps(static_cast<float>(nk - j0)),
                                             _CMP_LT_OQ);
          sv = _mm256_blendv_ps(neg_inf, sv, valid);
        }
        vmax = _mm256_max_ps(vmax, sv);
        _mm256_storeu_ps(s + j0, sv);
      }
      const float m_new = std::max(m[h], HmaxPs(vmax));
      const float corr = m[h] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m[h] - m_new);
      const __m256 vm = _mm256_set1_ps(m_new);
      __m256 psum = _mm256_setzero_ps();
      for (int64_t j0 = 0; j0 < nk; j0 += 8) {
        __m256 p = ExpPs(_mm256_sub_ps(_mm256_loadu_ps(s + j0), vm));
        psum = _mm256_add_ps(psum, p);
        _mm256_storeu_ps(s + j0, p);
      }
      l[h] = l[h] * corr + HsumPs(psum);
      m[h] = m_new;
      float* a = acc.data() + h * hd;
      for (int64_t d0 = 0; d0 < hd; d0 += 64) {
        const int nv = static_cast<int>(std::min<int64_t>(8, (hd - d0) / 8));
        AccumulateVDispatch(nv, a + d0, corr, s, vrows.data(), nk, d0);
      }
    }
  }
  for (int32_t h = 0; h < g; ++h) {
    const __m256 inv = _mm256_set1_ps(1.0f / l[h]);
    for (int64_t d = 0; d < hd; d += 8) {
      _mm256_storeu_ps(item.out + h * hd + d,
                       _mm256_mul_ps(_mm256_loadu_ps(acc.data() + h * hd + d), inv));
    }
  }
}

}  // namespace tandem::kernels
