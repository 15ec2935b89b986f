#include "engine/model/kv_budget.h"

#include "absl/strings/str_format.h"
#include "engine/kv/kv_storage.h"

namespace tandem::model {

absl::StatusOr<int32_t> NumKvBlocks(const Model& model, int32_t block_size, int32_t kv_blocks,
                                    int64_t kv_cache_bytes) {
  if (kv_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--kv-blocks %d is negative: must be >= 1 (or 0 to use --kv-cache-bytes)", kv_blocks));
  }
  if (kv_blocks > 0) return kv_blocks;
  const ModelConfig& c = model.config();
  kv::KvStorageConfig shape;
  shape.num_layers = c.num_layers;
  shape.block_size = block_size;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.dtype = model.kv_dtype();
  const int32_t blocks =
      kv_cache_bytes > 0 ? kv::KvStorage::NumBlocksForBytes(shape, kv_cache_bytes) : 0;
  if (blocks < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--kv-cache-bytes %d holds no KV block: one block of %d tokens needs %d bytes",
        kv_cache_bytes, block_size, kv::KvStorage::BytesPerBlock(shape)));
  }
  return blocks;
}

}  // namespace tandem::model
