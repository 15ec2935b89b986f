// The per-ISA inner kernel of PagedAttention: one work item is one query token
// × one KV head, covering the `group` query heads that share that KV head
// (GQA), so each K/V row is read once per item, not once per query head.
#ifndef TANDEM_KERNELS_CPU_PAGED_ATTENTION_ITEM_H_
#define TANDEM_KERNELS_CPU_PAGED_ATTENTION_ITEM_H_

#include <cstdint>

#include "kernels/kernels.h"

namespace tandem::kernels {

struct AttentionItem {
  const float* q = nullptr;  // [group, head_dim]: query heads kv_head*group ..
  float* out = nullptr;      // [group, head_dim]
  const int32_t* block_table = nullptr;
  int64_t num_keys = 0;  // attends to cached positions [0, num_keys); never reads past them
  int32_t kv_head = 0;
  int32_t group = 0;
};

// out = softmax(scale · q Kᵀ) V over the item's keys, fp32 accumulation.
// Thread-safe (scratch is thread-local).
using AttentionItemFn = void (*)(const AttentionItem& item, const PagedKvView& cache, float scale);

// Two-pass softmax, scalar. Any head_dim.
void AttendItemRef(const AttentionItem& item, const PagedKvView& cache, float scale);
// Online softmax per key block, AVX2 + FMA + F16C; head_dim % 8 == 0.
void AttendItemAvx2(const AttentionItem& item, const PagedKvView& cache, float scale);
// The AVX-512 item function for this cache and GQA group size: all heads of
// the group per K/V row, online softmax per key block (head_dim 64 with group
// <= 4, or 128 with group <= 2); AttendItemAvx2 for other shapes. Callable
// only when HardwareIsa() == kAvx512.
AttentionItemFn AttendItemAvx512For(const PagedKvView& cache, int32_t group);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_PAGED_ATTENTION_ITEM_H_
