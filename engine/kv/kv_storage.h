// KvStorage: the memory of a paged KV cache on the CPU — for every layer a K
// and a V page array, each [num_blocks, block_size, num_kv_heads, head_dim]
// of `dtype`, zero-initialized. Pure storage: which block belongs to which
// sequence is decided elsewhere (KvManager, in the coordinator); the worker
// only hands out per-layer views to the kernels and executes copy-on-write
// orders.
//
// Thread-safety: LayerView() may be called from any thread; the views point
// into memory owned by this object for its whole lifetime. CopyBlocks() and
// kernels writing through the views must not run concurrently on the same
// blocks (the step executor serializes them).
#ifndef TANDEM_ENGINE_KV_KV_STORAGE_H_
#define TANDEM_ENGINE_KV_KV_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "engine/kv/block_copy.h"
#include "kernels/kernels.h"

namespace tandem::kv {

struct KvStorageConfig {
  int32_t num_layers = 0;
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  kernels::KvDtype dtype = kernels::KvDtype::kF32;
};

class KvStorage {
 public:
  // Limits on each dimension, to catch corrupt model metadata early.
  static constexpr int32_t kMaxLayers = 4096;
  static constexpr int32_t kMaxBlockSize = 1024;
  static constexpr int32_t kMaxKvHeads = 4096;
  static constexpr int32_t kMaxHeadDim = 16384;

  // Validates `config` and allocates zeroed pages. InvalidArgument names the
  // offending field and its limit; ResourceExhausted when the total exceeds
  // MemoryLimitBytes() (the message names both byte counts) or the
  // allocation fails.
  static absl::StatusOr<std::unique_ptr<KvStorage>> Create(const KvStorageConfig& config);

  // Bytes one block takes over all layers, K and V: 2 * num_layers *
  // block_size * num_kv_heads * head_dim * sizeof(dtype). config.num_blocks
  // is ignored. Saturates at INT64_MAX; CHECKs nothing, expects the
  // dimensions to be non-negative.
  static int64_t BytesPerBlock(const KvStorageConfig& config);

  // How many blocks of this shape fit in `bytes` (num_blocks is ignored),
  // clamped to [0, INT32_MAX]. 0 when the shape is empty or invalid.
  static int32_t NumBlocksForBytes(const KvStorageConfig& shape_without_blocks, int64_t bytes);

  // The most Create() accepts: 3/4 of physical memory (sysconf).
  static int64_t MemoryLimitBytes();

  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvStorageConfig& config() const { return config_; }
  int64_t total_bytes() const { return total_bytes_; }

  // The pages of `layer` for the kernels. CHECKs 0 <= layer < num_layers.
  kernels::PagedKvView LayerView(int32_t layer);

  // Executes copy-on-write orders in order: for every layer, K and V of block
  // `src` are copied to block `dst`. CHECKs ids are in range and src != dst.
  void CopyBlocks(std::span<const BlockCopy> copies);

 private:
  KvStorage(const KvStorageConfig& config, std::byte* base, int64_t total_bytes,
            int64_t plane_stride);

  // Start of layer `layer`'s K (plane 0) or V (plane 1) pages.
  std::byte* Plane(int32_t layer, int plane) const;

  KvStorageConfig config_;
  std::byte* base_;       // mmap'ed region of total_bytes_, owned
  int64_t total_bytes_;
  int64_t plane_stride_;  // bytes between consecutive K/V planes (64-aligned)
  int64_t block_bytes_;   // bytes of one block in one plane
};

}  // namespace tandem::kv

#endif  // TANDEM_ENGINE_KV_KV_STORAGE_H_
