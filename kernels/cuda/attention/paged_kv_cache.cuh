// One layer of the paged KV cache in device memory, as the attention kernels
// read it: the layout of kernels::PagedKvView (kernels/kernels.h), so the CPU
// and CUDA backends share block ids and slots. Host code includes it (the
// real build compiles host code with the host compiler); the device-side
// tile load of the attention kernels is paged_kv_tile.cuh.
#ifndef TANDEM_KERNELS_CUDA_ATTENTION_PAGED_KV_CACHE_CUH_
#define TANDEM_KERNELS_CUDA_ATTENTION_PAGED_KV_CACHE_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

enum class KvCacheDtype : int32_t { kF32 = 0, kF16 = 1 };

// Largest head_dim the attention kernels accept (their shared-memory tiles
// are sized by it).
inline constexpr int32_t kMaxAttentionHeadDim = 256;

struct PagedKvCache {
  // Each [num_blocks, block_size, num_kv_heads, head_dim] of `dtype`
  // (float or __half), device memory.
  const void* k = nullptr;
  const void* v = nullptr;
  KvCacheDtype dtype = KvCacheDtype::kF32;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

// INVALID_ARGUMENT naming the value and the limit when `cache` cannot be
// read by the attention kernels with `num_heads` query heads.
inline absl::Status ValidatePagedKvCache(const PagedKvCache& cache, int32_t num_heads) {
  if (cache.k == nullptr || cache.v == nullptr) {
    return absl::InvalidArgumentError("paged KV cache: k and v must be device pointers, not null");
  }
  if (cache.dtype != KvCacheDtype::kF32 && cache.dtype != KvCacheDtype::kF16) {
    return absl::InvalidArgumentError(absl::StrCat("paged KV cache: dtype ",
                                                   static_cast<int32_t>(cache.dtype),
                                                   " is neither kF32 (0) nor kF16 (1)"));
  }
  if (cache.num_blocks < 1 || cache.block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("paged KV cache: num_blocks ", cache.num_blocks,
                                                   " and block_size ", cache.block_size,
                                                   " must be >= 1"));
  }
  if (cache.head_dim < 1 || cache.head_dim > kMaxAttentionHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat("paged KV cache: head_dim ", cache.head_dim,
                                                   " is outside [1, ", kMaxAttentionHeadDim, "]"));
  }
  if (cache.num_kv_heads < 1 || num_heads < 1 || num_heads % cache.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("attention: num_heads ", num_heads,
                                                   " must be a positive multiple of num_kv_heads ",
                                                   cache.num_kv_heads));
  }
  return absl::OkStatus();
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ATTENTION_PAGED_KV_CACHE_CUH_
