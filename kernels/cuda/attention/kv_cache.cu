// WriteKv: one block per token, its threads striding over the token's
// num_kv_heads · head_dim elements of K and of V. CopyKvBlocks: one block
// per (copy, K or V), its threads striding over the block's bytes in 16-byte
// words when every block starts 16-byte aligned, else in 2-byte words (every
// dtype's size).
#include "kernels/cuda/attention/kv_cache.cuh"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

using kernels::KvDtype;
using kernels::PagedKvView;

constexpr int kWarpSize = 32;
constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;

struct alignas(16) Word16 {
  uint64_t lo, hi;
};

__device__ __forceinline__ void Store(float v, float* dst) { *dst = v; }
__device__ __forceinline__ void Store(float v, __half* dst) { *dst = __float2half_rn(v); }

// k, v: [gridDim.x, row]; slots: [gridDim.x]; k_cache, v_cache: [num_slots, row].
template <typename T>
__global__ void WriteKvKernel(const float* __restrict__ k, const float* __restrict__ v,
                              const int64_t* __restrict__ slots, int64_t row, int64_t num_slots,
                              T* __restrict__ k_cache, T* __restrict__ v_cache) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0 || slot >= num_slots) return;
  for (int64_t j = threadIdx.x; j < row; j += blockDim.x) {
    Store(k[t * row + j], k_cache + slot * row + j);
    Store(v[t * row + j], v_cache + slot * row + j);
  }
}

// Copies block src[c] to dst[c] of cache gridDim.y == 0 ? k : v, a block
// being words_per_block words of W.
template <typename W>
__global__ void CopyKvBlocksKernel(const int32_t* __restrict__ src, const int32_t* __restrict__ dst,
                                   int32_t num_blocks, int64_t words_per_block, W* k, W* v) {
  const int64_t c = blockIdx.x;
  const int32_t from = src[c], to = dst[c];
  if (from < 0 || from >= num_blocks || to < 0 || to >= num_blocks || from == to) return;
  W* base = blockIdx.y == 0 ? k : v;
  const W* in = base + from * words_per_block;
  W* out = base + to * words_per_block;
  for (int64_t i = threadIdx.x; i < words_per_block; i += blockDim.x) out[i] = in[i];
}

int64_t ElemBytes(KvDtype dtype) { return dtype == KvDtype::kF32 ? 4 : 2; }

// Whole warps, no more than `work` items need.
int ThreadsFor(int64_t work) {
  return static_cast<int>(
      std::min<int64_t>(kMaxThreads, (work + kWarpSize - 1) / kWarpSize * kWarpSize));
}

absl::Status CheckView(const PagedKvView& c, std::string_view op) {
  if (c.num_blocks < 1 || c.block_size < 1 || c.num_kv_heads < 1 || c.head_dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cache of %d blocks x %d slots x %d heads x %d dims; each must be >= 1",
                        op, c.num_blocks, c.block_size, c.num_kv_heads, c.head_dim));
  }
  if (c.dtype != KvDtype::kF32 && c.dtype != KvDtype::kF16) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: KV dtype %d is neither f32 (0) nor f16 (1)", op, static_cast<int>(c.dtype)));
  }
  return absl::OkStatus();
}

absl::Status CheckCount(int64_t count, std::string_view what, std::string_view op) {
  if (count >= 0 && count <= kMaxGridX) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: %s %d outside [0, %d]", op, what, count, kMaxGridX));
}

}  // namespace

absl::Status WriteKv(const PagedKvView& cache, const float* k, const float* v, const int64_t* slots,
                     int64_t num_tokens, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckView(cache, "WriteKv"));
  RETURN_IF_ERROR(CheckCount(num_tokens, "num_tokens", "WriteKv"));
  if (num_tokens == 0) return absl::OkStatus();
  const int64_t row = static_cast<int64_t>(cache.num_kv_heads) * cache.head_dim;
  const int64_t num_slots = static_cast<int64_t>(cache.num_blocks) * cache.block_size;
  const auto grid = static_cast<unsigned>(num_tokens);
  if (cache.dtype == KvDtype::kF32) {
    TANDEM_LAUNCH(WriteKvKernel<float>, grid, ThreadsFor(row), 0, stream, k, v, slots, row,
                  num_slots, static_cast<float*>(cache.k), static_cast<float*>(cache.v));
  } else {
    TANDEM_LAUNCH(WriteKvKernel<__half>, grid, ThreadsFor(row), 0, stream, k, v, slots, row,
                  num_slots, static_cast<__half*>(cache.k), static_cast<__half*>(cache.v));
  }
  return LaunchStatus("WriteKvKernel");
}

absl::Status CopyKvBlocks(const PagedKvView& cache, const int32_t* src, const int32_t* dst,
                          int64_t num_copies, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckView(cache, "CopyKvBlocks"));
  RETURN_IF_ERROR(CheckCount(num_copies, "num_copies", "CopyKvBlocks"));
  if (num_copies == 0) return absl::OkStatus();
  const int64_t block_bytes = static_cast<int64_t>(cache.block_size) * cache.num_kv_heads *
                              cache.head_dim * ElemBytes(cache.dtype);
  const bool wide = block_bytes % sizeof(Word16) == 0 &&
                    reinterpret_cast<uintptr_t>(cache.k) % alignof(Word16) == 0 &&
                    reinterpret_cast<uintptr_t>(cache.v) % alignof(Word16) == 0;
  const dim3 grid(static_cast<unsigned>(num_copies), 2);  // y: 0 = K, 1 = V
  if (wide) {
    const int64_t words = block_bytes / static_cast<int64_t>(sizeof(Word16));
    TANDEM_LAUNCH(CopyKvBlocksKernel<Word16>, grid, ThreadsFor(words), 0, stream, src, dst,
                  cache.num_blocks, words, static_cast<Word16*>(cache.k),
                  static_cast<Word16*>(cache.v));
  } else {
    const int64_t words = block_bytes / static_cast<int64_t>(sizeof(uint16_t));
    TANDEM_LAUNCH(CopyKvBlocksKernel<uint16_t>, grid, ThreadsFor(words), 0, stream, src, dst,
                  cache.num_blocks, words, static_cast<uint16_t*>(cache.k),
                  static_cast<uint16_t*>(cache.v));
  }
  return LaunchStatus("CopyKvBlocksKernel");
}

}  // namespace tandem::cuda
