// BlockCopy: one copy-on-write order, produced by the bookkeeping (KvManager)
// and carried out by the storage (KvStorage) before the forward that writes
// into `dst`. Kept in its own header so storage does not depend on the
// bookkeeping.
#ifndef TANDEM_ENGINE_KV_BLOCK_COPY_H_
#define TANDEM_ENGINE_KV_BLOCK_COPY_H_

#include "common/strong_id.h"

namespace tandem::kv {

// Copy every layer's K and V of block `src` into block `dst`.
struct BlockCopy {
  BlockId src;
  BlockId dst;

  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

}  // namespace tandem::kv

#endif  // TANDEM_ENGINE_KV_BLOCK_COPY_H_
