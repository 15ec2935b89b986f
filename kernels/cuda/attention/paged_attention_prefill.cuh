// Paged-attention prefill on the GPU: causal grouped-query attention for a
// batch of sequences of varying query lengths (prefill chunks, also after
// cached prefix blocks, and single decode tokens) without padding, reading
// K/V through block tables. Flash-style: a tile of query tokens (all the
// query heads of one KV head) against tiles of keys in shared memory, with
// an online softmax, so no score matrix of the whole context is kept.
//
// Numerics: fp32 throughout; versus the CPU reference (kernels::PagedAttention
// at Isa::kReference, a two-pass softmax) outputs differ by summation order
// and the online rescaling (tested at abs 1e-4).
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef TANDEM_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_PREFILL_CUH_
#define TANDEM_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_PREFILL_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/attention/paged_kv_cache.cuh"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

// One sequence of the batch, as kernels::AttentionSeq: query rows [q_begin,
// q_begin + q_len) are its tokens at positions start_pos .. start_pos + q_len
// - 1; query row i attends to cached positions [0, start_pos + i]. Its K/V
// (including the batch's own tokens) must already be in the cache.
struct PagedAttentionSeq {
  int32_t q_begin = 0;
  int32_t q_len = 0;
  int32_t start_pos = 0;
};

// All pointers are device memory.
struct PagedAttentionPrefillParams {
  const float* q = nullptr;  // [num_tokens, num_heads, head_dim]
  float* out = nullptr;      // [num_tokens, num_heads, head_dim]; rows of no sequence untouched
  const PagedAttentionSeq* seqs = nullptr;  // [num_seqs]
  // Row s lists sequence s's blocks: [num_seqs, max_blocks_per_seq]; it must
  // cover positions [0, start_pos + q_len).
  const int32_t* block_tables = nullptr;
  int32_t num_seqs = 0;
  int32_t num_heads = 0;  // a multiple of the cache's num_kv_heads
  int32_t max_blocks_per_seq = 0;
  int32_t max_q_len = 0;  // bound on every q_len, known on the host; sizes the grid
  float scale = 1.0f;     // usually 1/sqrt(head_dim)
};

// Query tokens one block handles at once for this shape (the most, up to
// 16, whose tiles fit in 48 KiB of shared memory); 0 when not even one fits.
int32_t PrefillQueryTile(int32_t group, int32_t head_dim);

// Enqueues the attention on `stream`. INVALID_ARGUMENT naming the value and
// the limit for bad shapes (as ValidatePagedKvCache; num_seqs outside [1,
// 65535]; max_q_len < 1; null pointers); INTERNAL when the launch fails.
absl::Status PagedAttentionPrefill(const PagedAttentionPrefillParams& params,
                                   const PagedKvCache& cache, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_PREFILL_CUH_
