// Paged KV cache writes on the GPU: new tokens' K/V into their slots, and
// whole-block copies for copy-on-write. The layout is kernels::PagedKvView's
// (K and V each [num_blocks, block_size, num_kv_heads, head_dim] of the
// view's dtype), with k and v pointing to device memory.
#ifndef TANDEM_KERNELS_CUDA_ATTENTION_KV_CACHE_CUH_
#define TANDEM_KERNELS_CUDA_ATTENTION_KV_CACHE_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/kernels.h"

namespace tandem::cuda {

// Stores token t's K and V rows at slot slots[t] (= block_id · block_size +
// offset in the block), converted to the cache's dtype: f32 as is, f16
// rounded to nearest even, the bits of kernels::WriteKv (NaN aside: the GPU
// stores the canonical 0x7FFF, the reference 0x7E00 with the sign).
//   k, v: [num_tokens, num_kv_heads, head_dim] f32; slots: [num_tokens];
//   all in device memory.
// A slot outside [0, num_blocks · block_size) is skipped (nothing written):
// -1 marks a padding token, and the kernel cannot report an error. Two
// tokens must not share a slot. Runs asynchronously on `stream`.
// INVALID_ARGUMENT for a view with a non-positive dimension or num_tokens
// outside [0, 2^31); INTERNAL when the launch fails.
absl::Status WriteKv(const kernels::PagedKvView& cache, const float* k, const float* v,
                     const int64_t* slots, int64_t num_tokens, cudaStream_t stream);

// Copies block src[i] to block dst[i], K and V, for i < num_copies (src, dst
// in device memory). A pair with an id outside [0, num_blocks) or src == dst
// is skipped. The copies run concurrently, so no block may be both a
// destination and a source, or a destination twice, in one call (the KV
// manager copies shared blocks into fresh ones). Bit-exact, as
// kernels::CopyKvBlocks. Runs asynchronously on `stream`. INVALID_ARGUMENT
// for a view with a non-positive dimension or num_copies outside [0, 2^31);
// INTERNAL when the launch fails.
absl::Status CopyKvBlocks(const kernels::PagedKvView& cache, const int32_t* src, const int32_t* dst,
                          int64_t num_copies, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ATTENTION_KV_CACHE_CUH_
