// KvManager: the KV-cache bookkeeping of one worker group, as the scheduler
// uses it. It decides which block holds each token of each sequence,
// shares blocks between sequences (fork, cached prompt prefixes), orders
// copy-on-write copies and evicts cached blocks — all without touching
// tensors. The storage side (KvStorage, in the workers) only receives block
// ids, slots and BlockCopy orders.
//
// Running out of blocks is a normal outcome: AppendTokens returns nullopt and
// changes nothing. Misuse (unknown or duplicate sequence ids, positions out of
// range) is a programmer bug and CHECK-fails.
//
// Block accounting: every block is free (on the free list), used (referenced
// by at least one sequence) or cached-unreferenced (parked in the prefix
// cache's LRU, reusable by a prefix hit until evicted for new data).
//
// Thread-safety: not thread-safe; owned by the scheduler thread.
#ifndef TANDEM_ENGINE_KV_KV_MANAGER_H_
#define TANDEM_ENGINE_KV_KV_MANAGER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/strong_id.h"
#include "engine/kv/block_copy.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/block_table.h"
#include "engine/kv/prefix_cache.h"

namespace tandem::kv {

struct KvManagerConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // tokens per block
  bool enable_prefix_cache = true;
};

inline constexpr int32_t kMaxBlockSize = 1024;

// OK when num_blocks >= 1 and block_size is in [1, kMaxBlockSize];
// InvalidArgument naming the value and the limit otherwise.
absl::Status ValidateKvManagerConfig(const KvManagerConfig& config);

struct KvStats {
  int32_t num_blocks_total = 0;
  int32_t num_blocks_free = 0;    // on the free list
  int32_t num_blocks_used = 0;    // referenced by at least one sequence
  int32_t num_blocks_cached = 0;  // in the prefix cache and unreferenced (evictable)
  // Accumulated over AddSequence calls: prompt tokens offered / found cached.
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
};

class KvManager {
 public:
  // CHECKs ValidateKvManagerConfig(config) (validate it first at start-up).
  explicit KvManager(const KvManagerConfig& config);

  KvManager(const KvManager&) = delete;
  KvManager& operator=(const KvManager&) = delete;

  // Registers a new sequence with its prompt. Matches the prompt's leading
  // full blocks against the prefix cache and references them; returns the
  // number of prompt tokens whose KV is already cached (a multiple of
  // block_size, at most prompt.size() - 1 so the last prompt token is always
  // computed to get logits). Those tokens become the sequence's tokens; the
  // caller appends the rest with AppendTokens. Never allocates new blocks, so
  // it cannot fail for capacity. CHECKs `seq` is new. With
  // use_prefix_cache false nothing is looked up (and nothing counted as a
  // query): every prompt token is computed, for a request that needs each
  // position's logits; its full blocks are still registered for others.
  int32_t AddSequence(SeqId seq, std::span<const int32_t> prompt, bool use_prefix_cache = true);

  // Number of new blocks AppendTokens(seq, n tokens) would take right now,
  // including a copy-on-write block. CHECKs `seq` exists and n >= 0.
  int32_t NumBlocksNeeded(SeqId seq, int32_t num_new_tokens) const;

  // Reserves KV slots for `tokens` appended after the sequence's current
  // tokens (the next forward writes their K/V; see Slot()). Writing into a
  // block that other sequences share is preceded by a copy (copy-on-write):
  // the returned copies must be done by the storage before that forward.
  // A block registered in the prefix cache is never written: if this
  // sequence is its only user it is unregistered first, otherwise copied.
  // Blocks that become full are registered in the prefix cache. Returns
  // nullopt and changes nothing when there are not enough free or evictable
  // blocks. CHECKs `seq` exists.
  std::optional<std::vector<BlockCopy>> AppendTokens(SeqId seq, std::span<const int32_t> tokens);

  // Registers `child` sharing all of `parent`'s blocks and tokens (refs++).
  // A shared partial last block is copied by whichever writes it first.
  // CHECKs `parent` exists and `child` is new.
  void Fork(SeqId parent, SeqId child);

  // Keeps the first `num_tokens` tokens and releases the blocks past them.
  // A full cached block that becomes partial is unregistered when this
  // sequence is its only user (otherwise the next write copies it). CHECKs
  // 0 <= num_tokens <= NumTokens(seq).
  void Truncate(SeqId seq, int32_t num_tokens);

  // Releases all of the sequence's blocks and forgets it: blocks nobody else
  // references go to the prefix cache's LRU when cached (last block first,
  // so the shared head of a prompt is evicted last), else to the free list.
  // CHECKs `seq` exists.
  void Free(SeqId seq);

  bool Contains(SeqId seq) const;
  // The sequence's blocks in token order. Valid until the next mutating call.
  std::span<const BlockId> BlockTable(SeqId seq) const;
  // The sequence's tokens (cached prefix + appended). Valid until the next
  // mutating call.
  std::span<const int32_t> Tokens(SeqId seq) const;
  int32_t NumTokens(SeqId seq) const;
  // Slot (block_id * block_size + offset) of token position `pos` of `seq`,
  // for the forward's KV writes. CHECKs 0 <= pos < NumTokens(seq).
  int64_t Slot(SeqId seq, int32_t pos) const;

  int32_t block_size() const { return config_.block_size; }
  int32_t num_sequences() const { return static_cast<int32_t>(tables_.size()); }
  // Blocks available to AppendTokens: free + evictable cached.
  int32_t num_free_blocks() const { return pool_.num_free() + cache_.num_parked(); }
  KvStats stats() const;

  // Verifies every invariant: each block's ref count equals the number of
  // sequence table entries referencing it; free + used + cached-unreferenced
  // == total; no block both free and referenced; the LRU holds exactly the
  // unreferenced cached blocks; every prefix-cache entry maps back; each
  // table's sizes, chain keys and cached contents agree with its tokens.
  // Returns an Internal error describing the first violation. O(total state);
  // for tests and debug checks.
  absl::Status CheckInvariants() const;

 private:
  using Table = ::tandem::kv::BlockTable;

  Table& MutableTable(SeqId seq);
  const Table& GetTable(SeqId seq) const;
  // A free block, else an evicted cached one, with ref count 1; nullopt when
  // neither exists.
  std::optional<BlockId> AllocateBlock();
  // Drops one reference; at zero the block is parked if cached, else freed.
  void ReleaseBlock(BlockId block);
  // Registers the table's newest full block in the prefix cache and records
  // its chain link.
  void OnBlockFull(Table& table);
  absl::Status CheckTable(SeqId seq, const Table& table) const;

  KvManagerConfig config_;
  BlockPool pool_;
  PrefixCache cache_;
  absl::flat_hash_map<SeqId, Table> tables_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace tandem::kv

#endif  // TANDEM_ENGINE_KV_KV_MANAGER_H_
