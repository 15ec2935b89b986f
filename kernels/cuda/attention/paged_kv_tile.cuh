// The device-side tile load both paged-attention kernels use: rows of one
// sequence's K or V, found through its block table, into shared memory as
// float. Device code only (.cu sources).
#ifndef TANDEM_KERNELS_CUDA_ATTENTION_PAGED_KV_TILE_CUH_
#define TANDEM_KERNELS_CUDA_ATTENTION_PAGED_KV_TILE_CUH_

#include <cstdint>

#include "kernels/cuda/attention/paged_kv_cache.cuh"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

__device__ __forceinline__ float KvToFloat(float x) { return x; }
__device__ __forceinline__ float KvToFloat(__half x) { return __half2float(x); }

// Block-cooperative copy of the K or V rows of `kv_head` at positions
// [first_pos, first_pos + count) of one sequence (found through
// `block_table`) into tile[row * stride + d] as float, for rows < tile_rows;
// rows >= count are zero, so that a zero weight times them stays zero.
// Callers separate it from readers of `tile` with barriers.
template <typename T>
__device__ void LoadKvTile(const T* __restrict__ base, const PagedKvCache& cache,
                           const int32_t* __restrict__ block_table, int64_t first_pos, int count,
                           int kv_head, float* tile, int tile_rows, int stride) {
  const int head_dim = cache.head_dim;
  for (int idx = threadIdx.x; idx < tile_rows * head_dim; idx += blockDim.x) {
    const int row = idx / head_dim;
    const int d = idx % head_dim;
    float x = 0.0f;
    if (row < count) {
      const int64_t pos = first_pos + row;
      const int64_t block = block_table[pos / cache.block_size];
      const int64_t slot = block * cache.block_size + pos % cache.block_size;
      x = KvToFloat(base[(slot * cache.num_kv_heads + kv_head) * head_dim + d]);
    }
    tile[row * stride + d] = x;
  }
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_ATTENTION_PAGED_KV_TILE_CUH_
