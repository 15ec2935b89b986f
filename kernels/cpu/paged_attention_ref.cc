// Scalar reference attention for one (token, KV head) item: scores, max,
// exp-sum, weighted V sum — the textbook two-pass softmax in fp32.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/quant_formats.h"
#include "kernels/cpu/paged_attention_item.h"

namespace tandem::kernels {
namespace {

// Element d of the K or V row of cached position `pos` for `kv_head`.
float CacheAt(const void* base, const PagedKvView& cache, const int32_t* block_table, int64_t pos,
              int32_t kv_head, int64_t d) {
  const int64_t block = block_table[pos / cache.block_size];
  const int64_t index =
      ((block * cache.block_size + pos % cache.block_size) * cache.num_kv_heads + kv_head) *
          cache.head_dim + d;
  if (cache.dtype == KvDtype::kF32) return static_cast<const float*>(base)[index];
  return gguf::Fp16ToFp32(static_cast<const uint16_t*>(base)[index]);
}

}  // namespace

void AttendItemRef(const AttentionItem& item, const PagedKvView& cache, float scale) {
  const int64_t hd = cache.head_dim;
  thread_local std::vector<float> scores;
  if (static_cast<int64_t>(scores.size()) < item.num_keys) scores.resize(item.num_keys);
  for (int32_t h = 0; h < item.group; ++h) {
    const float* q = item.q + h * hd;
    float* out = item.out + h * hd;
    float max_score = -std::numeric_limits<float>::infinity();
    for (int64_t pos = 0; pos < item.num_keys; ++pos) {
      float dot = 0.0f;
      for (int64_t d = 0; d < hd; ++d) {
        dot += q[d] * CacheAt(cache.k, cache, item.block_table, pos, item.kv_head, d);
      }
      scores[pos] = dot * scale;
      max_score = std::fmax(max_score, scores[pos]);
    }
    float sum = 0.0f;
    for (int64_t pos = 0; pos < item.num_keys; ++pos) {
      scores[pos] = std::exp(scores[pos] - max_score);
      sum += scores[pos];
    }
    for (int64_t d = 0; d < hd; ++d) out[d] = 0.0f;
    for (int64_t pos = 0; pos < item.num_keys; ++pos) {
      for (int64_t d = 0; d < hd; ++d) {
        out[d] += scores[pos] * CacheAt(cache.v, cache, item.block_table, pos, item.kv_head, d);
      }
    }
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < hd; ++d) out[d] *= inv;
  }
}

}  // namespace tandem::kernels
