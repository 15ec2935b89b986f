// Paged-attention decode on the GPU: one query token per sequence attending
// to its whole cached context through its block table, with grouped-query
// attention. Long contexts are split into partitions of `partition_size`
// keys computed by separate blocks (split-K, as flash-decoding does), and a
// second kernel merges the partitions' softmax statistics and outputs.
//
// Numerics: fp32 throughout; versus the CPU reference (kernels::PagedAttention
// at Isa::kReference) outputs differ only by summation order (tested at abs
// 1e-4).
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef TANDEM_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_DECODE_CUH_
#define TANDEM_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_DECODE_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/attention/paged_kv_cache.cuh"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

inline constexpr int32_t kDefaultDecodePartitionSize = 512;

// All pointers are device memory.
struct PagedAttentionDecodeParams {
  const float* q = nullptr;  // [num_seqs, num_heads, head_dim]
  float* out = nullptr;      // [num_seqs, num_heads, head_dim]
  // Row s lists sequence s's blocks: [num_seqs, max_blocks_per_seq].
  const int32_t* block_tables = nullptr;
  // Sequence s's query attends to cached positions [0, context_lens[s]);
  // each in [1, max_context_len] (a length of 0 yields a zero output row).
  const int32_t* context_lens = nullptr;
  int32_t num_seqs = 0;
  int32_t num_heads = 0;  // a multiple of the cache's num_kv_heads
  int32_t max_blocks_per_seq = 0;
  int32_t max_context_len = 0;  // bound on context_lens known on the host; sizes the grid
  int32_t partition_size = kDefaultDecodePartitionSize;  // keys per split-K partition
  float scale = 1.0f;                                    // usually 1/sqrt(head_dim)
  // PagedAttentionDecodeWorkspaceBytes(params, cache) bytes of device memory
  // for the partitions' partial results; may be null when that is 0.
  void* workspace = nullptr;
};

// Partitions of the longest context: ceil(max_context_len / partition_size).
int32_t NumDecodePartitions(const PagedAttentionDecodeParams& params);

// Bytes of workspace PagedAttentionDecode needs: 0 for a single partition,
// else num_seqs * num_heads * partitions * (head_dim + 2) floats.
// INVALID_ARGUMENT as PagedAttentionDecode for bad shapes.
absl::StatusOr<int64_t> PagedAttentionDecodeWorkspaceBytes(const PagedAttentionDecodeParams& params,
                                                           const PagedKvCache& cache);

// Enqueues the decode attention on `stream`: out[s, h, :] = softmax(scale *
// q[s, h, :] · K_sᵀ) · V_s over the context of sequence s, KV head h /
// (num_heads / num_kv_heads). INVALID_ARGUMENT naming the value and the
// limit for bad shapes (head_dim > kMaxAttentionHeadDim, num_heads not a
// multiple of num_kv_heads, max_context_len beyond the block tables, shared
// memory past 48 KiB, a missing workspace); INTERNAL when a launch fails.
absl::Status PagedAttentionDecode(const PagedAttentionDecodeParams& params,
                                  const PagedKvCache& cache, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ATTENTION_PAGED_ATTENTION_DECODE_CUH_
