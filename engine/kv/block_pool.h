// BlockPool: a fixed set of KV block ids with reference counts and a free
// list. Pure bookkeeping: it never touches tensor memory.
//
// A block is in exactly one of three states:
//   free       on the free list, ref count 0;
//   referenced ref count >= 1 (held by one or more sequences);
//   parked     ref count 0 but not on the free list: its owner (the prefix
//              cache) keeps it for reuse until it calls Release().
// DecRef never puts a block back on the free list by itself; the caller
// decides between parking it and Release().
//
// Thread-safety: not thread-safe; owned and used by one thread (the
// scheduler's KvManager).
#ifndef TANDEM_ENGINE_KV_BLOCK_POOL_H_
#define TANDEM_ENGINE_KV_BLOCK_POOL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/strong_id.h"

namespace tandem::kv {

class BlockPool {
 public:
  // All `num_blocks` blocks start free (CHECKs num_blocks >= 0). Allocate()
  // hands them out lowest id first.
  explicit BlockPool(int32_t num_blocks);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Takes a block off the free list with ref count 1, in O(1). Returns
  // nullopt when the free list is empty (a normal outcome).
  std::optional<BlockId> Allocate();

  // Adds a reference. A parked block (ref 0, not free) becomes referenced
  // again. CHECKs the block is in range and not on the free list.
  void IncRef(BlockId block);

  // Drops a reference and returns the new count. At 0 the block is parked:
  // the caller must either keep it (prefix cache) or Release() it. CHECKs
  // the count was > 0.
  int32_t DecRef(BlockId block);

  // Puts a parked block (ref 0, not free) back on the free list. CHECKs
  // its state.
  void Release(BlockId block);

  int32_t ref_count(BlockId block) const;
  bool IsFree(BlockId block) const;

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  // Blocks with ref count >= 1.
  int32_t num_used() const { return num_used_; }

  // Verifies the free list against the per-block flags and counts; returns
  // an Internal error naming the first inconsistency.
  absl::Status CheckConsistency() const;

 private:
  void CheckInRange(BlockId block) const;

  std::vector<int32_t> ref_counts_;  // [num_blocks]
  std::vector<uint8_t> is_free_;     // [num_blocks], 1 while on free_list_
  // Stack of free blocks; the back is handed out next.
  std::vector<BlockId> free_list_;
  int32_t num_used_ = 0;
};

}  // namespace tandem::kv

#endif  // TANDEM_ENGINE_KV_BLOCK_POOL_H_
