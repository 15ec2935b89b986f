// PagedAttention: validates the batch, splits it into (token, KV head) items
// and hands them to the pool with dynamic scheduling (items differ in context
// length, so a static split would leave threads idle). Each item's result
// depends only on its own inputs, so output is identical for any thread count.
#include <atomic>
#include <vector>

#include "common/logging.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/paged_attention_item.h"
#include "kernels/kernels.h"

namespace tandem::kernels {

void PagedAttention(const float* q, std::span<const AttentionSeq> seqs, const PagedKvView& cache,
                    const AttentionParams& params, float* out, ThreadPool* pool) {
  CHECK(cache.num_kv_heads > 0 && params.num_heads % cache.num_kv_heads == 0,
        "PagedAttention: num_heads %d not a multiple of num_kv_heads %d", params.num_heads,
        cache.num_kv_heads);
  const int32_t group = params.num_heads / cache.num_kv_heads;
  const int64_t hd = cache.head_dim;
  AttentionItemFn fn = AttendItemRef;
  const Isa isa = ClampIsa(params.isa);
  if (isa != Isa::kReference && hd % 8 == 0) {
    fn = isa == Isa::kAvx512 ? AttendItemAvx512For(cache, group) : AttendItemAvx2;
  }

  // (seq, row) of every query token, in batch order; reused across calls.
  struct TokenRef {
    int32_t seq;
    int32_t row;
  };
  // thread_local storage, but the lambda below must read the caller's copy:
  // name it through a reference so pool threads do not see their own.
  thread_local std::vector<TokenRef> tokens_storage;
  std::vector<TokenRef>& tokens = tokens_storage;
  tokens.clear();
  for (size_t s = 0; s < seqs.size(); ++s) {
    const AttentionSeq& seq = seqs[s];
    const int64_t capacity = seq.num_blocks * cache.block_size;
    CHECK(seq.start_pos >= 0 && seq.q_len >= 0 && seq.start_pos + seq.q_len <= capacity,
          "PagedAttention: seq %d needs %d positions, block table holds %d", s,
          seq.start_pos + seq.q_len, capacity);
    for (int64_t b = 0; b < (seq.start_pos + seq.q_len + cache.block_size - 1) / cache.block_size;
         ++b) {
      CHECK(seq.block_table[b] >= 0 && seq.block_table[b] < cache.num_blocks,
            "PagedAttention: seq %d block %d id %d outside [0, %d)", s, b, seq.block_table[b],
            cache.num_blocks);
    }
    for (int64_t i = 0; i < seq.q_len; ++i) {
      tokens.push_back({static_cast<int32_t>(s), static_cast<int32_t>(i)});
    }
  }
  const int64_t num_items = static_cast<int64_t>(tokens.size()) * cache.num_kv_heads;
  if (num_items == 0) return;

  std::atomic<int64_t> next{0};
  auto work = [&](int, int64_t, int64_t) {
    for (int64_t it = next.fetch_add(1, std::memory_order_relaxed); it < num_items;
         it = next.fetch_add(1, std::memory_order_relaxed)) {
      const TokenRef& tr = tokens[it / cache.num_kv_heads];
      const AttentionSeq& seq = seqs[tr.seq];
      const int64_t t = seq.q_begin + tr.row;
      AttentionItem item;
      item.kv_head = static_cast<int32_t>(it % cache.num_kv_heads);
      item.group = group;
      item.q = q + (t * params.num_heads + static_cast<int64_t>(item.kv_head) * group) * hd;
      item.out = out + (t * params.num_heads + static_cast<int64_t>(item.kv_head) * group) * hd;
      item.block_table = seq.block_table;
      item.num_keys = seq.start_pos + tr.row + 1;
      fn(item, cache, params.scale);
    }
  };
  if (pool == nullptr || pool->num_threads() == 1 || num_items == 1) {
    work(0, 0, 1);
  } else {
    pool->ParallelFor(pool->num_threads(), 1, work);
  }
}

}  // namespace tandem::kernels
