// KV cache capacity in blocks for a model, from an explicit block count or a
// byte budget (--kv-blocks / --kv-cache-bytes of every binary that holds KV).
#ifndef TANDEM_ENGINE_MODEL_KV_BUDGET_H_
#define TANDEM_ENGINE_MODEL_KV_BUDGET_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/model/model.h"

namespace tandem::model {

// `kv_blocks` > 0 is taken as is; 0 sizes the cache from `kv_cache_bytes`
// (blocks of `block_size` tokens over the full model's KV heads, in the
// model's KV dtype). InvalidArgument naming the flag and the limit when
// kv_blocks is negative or the byte budget holds no block.
absl::StatusOr<int32_t> NumKvBlocks(const Model& model, int32_t block_size, int32_t kv_blocks,
                                    int64_t kv_cache_bytes);

}  // namespace tandem::model

#endif  // TANDEM_ENGINE_MODEL_KV_BUDGET_H_
