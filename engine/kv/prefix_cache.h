// PrefixCache: maps the content of full KV blocks to the blocks holding it,
// so sequences whose prompts share a prefix reuse its KV instead of
// recomputing it.
//
// Each full block is keyed by a 64-bit chain key: ChainKey(parent_key,
// block_tokens), where parent_key is the key of the previous block of the
// sequence (kRootKey for the first block). The key is stable across
// processes and builds (the router may compare keys computed elsewhere).
//
// Collisions never return wrong KV: every entry also stores its block's
// tokens and the entry id of its parent block's entry. Lookup() requires the
// tokens to be equal and the parent entry to be the one the caller matched
// for the previous block, so by induction a chain of hits is an exact match of
// the whole prefix, whatever the hash does. (Entry ids are never reused, so an
// evicted parent can never be confused with a later one.)
//
// Cached blocks that no sequence references are "parked" in an LRU list and
// stay reusable until EvictLru() hands them out for new data. The cache does
// not own ref counts; KvManager keeps it in step with the BlockPool.
//
// Thread-safety: not thread-safe; used by the thread that owns KvManager.
#ifndef TANDEM_ENGINE_KV_PREFIX_CACHE_H_
#define TANDEM_ENGINE_KV_PREFIX_CACHE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/strong_id.h"

namespace tandem::kv {

class PrefixCache {
 public:
  // Parent key of a sequence's first block.
  static constexpr uint64_t kRootKey = 0x7a3d'5e1c'9b04'f268ULL;
  // Parent entry id of a sequence's first block.
  static constexpr uint64_t kRootEntry = 0;
  // Entry id meaning "this chain cannot be cached" (a hash collision with
  // different content upstream); never matches and is never registered.
  static constexpr uint64_t kNoEntry = ~uint64_t{0};

  // Chain key of a block holding `tokens` after a block keyed `parent_key`.
  // Deterministic and independent of the process.
  static uint64_t ChainKey(uint64_t parent_key, std::span<const int32_t> tokens);

  // A cache for blocks [0, num_blocks), each block_size tokens. CHECKs
  // num_blocks >= 0 and block_size >= 1.
  PrefixCache(int32_t num_blocks, int32_t block_size);

  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Match {
    BlockId block;
    uint64_t entry;  // entry id; the parent entry for the next block's lookup
  };

  // Finds the block holding exactly `tokens` (block_size of them) after the
  // prefix whose last block matched `parent_entry` (kRootEntry for the first
  // block). Returns nullopt on a miss, including when `key` is present but
  // its content differs (a collision). Does not change recency.
  std::optional<Match> Lookup(uint64_t key, uint64_t parent_entry,
                              std::span<const int32_t> tokens) const;

  // Registers `block` (full, holding `tokens`, block_size of them) under
  // `key`. Returns the entry id that now represents this content:
  //  - a new entry when `key` was free (the block is then cached);
  //  - the existing entry when `key` already holds the same tokens and parent
  //    (`block` stays uncached; its content is a duplicate);
  //  - kNoEntry when `key` holds different content (collision) or
  //    `parent_entry` is kNoEntry; `block` stays uncached.
  // CHECKs `block` is not cached already and tokens.size() == block_size.
  uint64_t Insert(uint64_t key, uint64_t parent_entry, BlockId block,
                  std::span<const int32_t> tokens);

  // Unregisters a cached block that is not parked (a referenced block about
  // to be written). CHECKs both.
  void Erase(BlockId block);

  bool IsCached(BlockId block) const;
  // Key, entry id and tokens of a cached block (CHECKs it is cached).
  uint64_t KeyOf(BlockId block) const;
  uint64_t EntryOf(BlockId block) const;
  std::span<const int32_t> TokensOf(BlockId block) const;

  // Moves a cached block whose last reference went away to the
  // most-recently-used end of the LRU. CHECKs cached and not parked.
  void Park(BlockId block);
  // Takes a parked block out of the LRU because it is referenced again.
  // CHECKs it is parked.
  void Unpark(BlockId block);
  bool IsParked(BlockId block) const;
  // Evicts the least recently parked block: unregisters it and returns it
  // (ref count 0, neither free nor cached) for reuse. nullopt when none.
  std::optional<BlockId> EvictLru();

  // Blocks registered (referenced or parked).
  int32_t num_cached() const { return static_cast<int32_t>(block_by_key_.size()); }
  // Parked (evictable) blocks.
  int32_t num_parked() const { return num_parked_; }
  // Parked blocks, least recently used first (for tests and invariants).
  std::vector<BlockId> LruOrder() const;

  // Verifies both maps agree and the LRU list is well formed; returns an
  // Internal error naming the first inconsistency.
  absl::Status CheckConsistency() const;

 private:
  static constexpr int32_t kNil = -1;

  struct Entry {
    bool cached = false;
    bool parked = false;
    uint64_t key = 0;
    uint64_t id = 0;
    uint64_t parent = 0;
    int32_t lru_prev = kNil;
    int32_t lru_next = kNil;
  };

  void CheckInRange(BlockId block) const;
  std::span<const int32_t> StoredTokens(int32_t block) const;
  void Unlink(int32_t block);

  int32_t block_size_;
  std::vector<Entry> entries_;    // [num_blocks]
  std::vector<int32_t> tokens_;   // [num_blocks, block_size], valid while cached
  absl::flat_hash_map<uint64_t, BlockId> block_by_key_;
  uint64_t next_entry_id_ = 1;
  // Intrusive doubly linked LRU over entries_: head = least recently used.
  int32_t lru_head_ = kNil;
  int32_t lru_tail_ = kNil;
  int32_t num_parked_ = 0;
};

}  // namespace tandem::kv

#endif  // TANDEM_ENGINE_KV_PREFIX_CACHE_H_
