#include "engine/kv/prefix_cache.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace tandem::kv {
namespace {

// The splitmix64 finalizer: a bijective mix with full avalanche.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

}  // namespace

uint64_t PrefixCache::ChainKey(uint64_t parent_key, std::span<const int32_t> tokens) {
  uint64_t h = Mix64(parent_key + kGolden);
  size_t i = 0;
  // Two tokens per 64-bit word; each step is a bijection of the state, keyed
  // by the word, so equal states imply equal inputs up to 64-bit collisions.
  for (; i + 1 < tokens.size(); i += 2) {
    uint64_t word = static_cast<uint32_t>(tokens[i]) |
                    (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 32);
    h = Mix64(h ^ word) + kGolden;
  }
  if (i < tokens.size()) h = Mix64(h ^ static_cast<uint32_t>(tokens[i])) + kGolden;
  return Mix64(h ^ static_cast<uint64_t>(tokens.size()));
}

PrefixCache::PrefixCache(int32_t num_blocks, int32_t block_size) : block_size_(block_size) {
  CHECK(num_blocks >= 0, "num_blocks %d must be >= 0", num_blocks);
  CHECK(block_size >= 1, "block_size %d must be >= 1", block_size);
  entries_.resize(num_blocks);
  tokens_.assign(static_cast<size_t>(num_blocks) * block_size, 0);
}

void PrefixCache::CheckInRange(BlockId block) const {
  CHECK(block.value() >= 0 && block.value() < static_cast<int32_t>(entries_.size()),
        "block %d out of range [0, %d)", block.value(), static_cast<int32_t>(entries_.size()));
}

std::span<const int32_t> PrefixCache::StoredTokens(int32_t block) const {
  return std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(block) * block_size_,
                                                    block_size_);
}

std::optional<PrefixCache::Match> PrefixCache::Lookup(uint64_t key, uint64_t parent_entry,
                                                      std::span<const int32_t> tokens) const {
  if (parent_entry == kNoEntry) return std::nullopt;
  auto it = block_by_key_.find(key);
  if (it == block_by_key_.end()) return std::nullopt;
  const Entry& entry = entries_[it->second.value()];
  if (entry.parent != parent_entry) return std::nullopt;
  std::span<const int32_t> stored = StoredTokens(it->second.value());
  if (!std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end())) {
    return std::nullopt;
  }
  return Match{it->second, entry.id};
}

uint64_t PrefixCache::Insert(uint64_t key, uint64_t parent_entry, BlockId block,
                             std::span<const int32_t> tokens) {
  CheckInRange(block);
  CHECK(!entries_[block.value()].cached, "block %d is already cached", block.value());
  CHECK(static_cast<int32_t>(tokens.size()) == block_size_,
        "Insert of %d tokens into a cache of block_size %d", static_cast<int32_t>(tokens.size()),
        block_size_);
  if (parent_entry == kNoEntry) return kNoEntry;
  auto [it, inserted] = block_by_key_.try_emplace(key, block);
  if (!inserted) {
    // Same content already cached in another block: keep that one.
    const Entry& existing = entries_[it->second.value()];
    std::span<const int32_t> stored = StoredTokens(it->second.value());
    if (existing.parent == parent_entry && std::equal(stored.begin(), stored.end(),
                                                      tokens.begin(), tokens.end())) {
      return existing.id;
    }
    return kNoEntry;
  }
  Entry& entry = entries_[block.value()];
  entry.cached = true;
  entry.parked = false;
  entry.key = key;
  entry.id = next_entry_id_++;
  entry.parent = parent_entry;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<size_t>(block.value()) * block_size_);
  return entry.id;
}

void PrefixCache::Erase(BlockId block) {
  CheckInRange(block);
  Entry& entry = entries_[block.value()];
  CHECK(entry.cached, "Erase of block %d, which is not cached", block.value());
  CHECK(!entry.parked, "Erase of block %d, which is parked (evict it instead)", block.value());
  block_by_key_.erase(entry.key);
  entry = Entry{};
}

bool PrefixCache::IsCached(BlockId block) const {
  CheckInRange(block);
  return entries_[block.value()].cached;
}

uint64_t PrefixCache::KeyOf(BlockId block) const {
  CHECK(IsCached(block), "block %d is not cached", block.value());
  return entries_[block.value()].key;
}

uint64_t PrefixCache::EntryOf(BlockId block) const {
  CHECK(IsCached(block), "block %d is not cached", block.value());
  return entries_[block.value()].id;
}

std::span<const int32_t> PrefixCache::TokensOf(BlockId block) const {
  CHECK(IsCached(block), "block %d is not cached", block.value());
  return StoredTokens(block.value());
}

void PrefixCache::Park(BlockId block) {
  CheckInRange(block);
  Entry& entry = entries_[block.value()];
  CHECK(entry.cached, "Park of block %d, which is not cached", block.value());
  CHECK(!entry.parked, "Park of block %d, already parked", block.value());
  entry.parked = true;
  entry.lru_prev = lru_tail_;
  entry.lru_next = kNil;
  if (lru_tail_ != kNil) {
    entries_[lru_tail_].lru_next = block.value();
  } else {
    lru_head_ = block.value();
  }
  lru_tail_ = block.value();
  ++num_parked_;
}

void PrefixCache::Unlink(int32_t block) {
  Entry& entry = entries_[block];
  if (entry.lru_prev != kNil) {
    entries_[entry.lru_prev].lru_next = entry.lru_next;
  } else {
    lru_head_ = entry.lru_next;
  }
  if (entry.lru_next != kNil) {
    entries_[entry.lru_next].lru_prev = entry.lru_prev;
  } else {
    lru_tail_ = entry.lru_prev;
  }
  entry.lru_prev = entry.lru_next = kNil;
  entry.parked = false;
  --num_parked_;
}

void PrefixCache::Unpark(BlockId block) {
  CheckInRange(block);
  CHECK(entries_[block.value()].parked, "Unpark of block %d, which is not parked",
        block.value());
  Unlink(block.value());
}

bool PrefixCache::IsParked(BlockId block) const {
  CheckInRange(block);
  return entries_[block.value()].parked;
}

std::optional<BlockId> PrefixCache::EvictLru() {
  if (lru_head_ == kNil) return std::nullopt;
  int32_t victim = lru_head_;
  Unlink(victim);
  block_by_key_.erase(entries_[victim].key);
  entries_[victim] = Entry{};
  return BlockId(victim);
}

std::vector<BlockId> PrefixCache::LruOrder() const {
  std::vector<BlockId> order;
  order.reserve(num_parked_);
  for (int32_t b = lru_head_; b != kNil && order.size() <= entries_.size();
       b = entries_[b].lru_next) {
    order.push_back(BlockId(b));
  }
  return order;
}

absl::Status PrefixCache::CheckConsistency() const {
  for (const auto& [key, block] : block_by_key_) {
    if (block.value() < 0 || block.value() >= static_cast<int32_t>(entries_.size())) {
      return absl::InternalError(absl::StrFormat("prefix cache key %#x maps to block %d, out of range",
                                                 key, block.value()));
    }
    const Entry& entry = entries_[block.value()];
    if (!entry.cached || entry.key != key) {
      return absl::InternalError(absl::StrFormat(
          "prefix cache key %#x maps to block %d, which maps back to %s", key, block.value(),
          entry.cached ? absl::StrFormat("key %#x", entry.key) : std::string("nothing")));
    }
  }
  int32_t cached = 0;
  int32_t parked = 0;
  for (int32_t b = 0; b < static_cast<int32_t>(entries_.size()); ++b) {
    const Entry& entry = entries_[b];
    if (entry.parked && !entry.cached) {
      return absl::InternalError(absl::StrFormat("block %d is parked but not cached", b));
    }
    if (!entry.cached) continue;
    ++cached;
    parked += entry.parked ? 1 : 0;
    auto it = block_by_key_.find(entry.key);
    if (it == block_by_key_.end() || it->second.value() != b) {
      return absl::InternalError(absl::StrFormat(
          "cached block %d has key %#x, which does not map back to it", b, entry.key));
    }
    if (entry.id == kRootEntry || entry.id == kNoEntry || entry.id >= next_entry_id_) {
      return absl::InternalError(
          absl::StrFormat("cached block %d has invalid entry id %d", b, entry.id));
    }
  }
  if (cached != num_cached()) {
    return absl::InternalError(absl::StrFormat("%d blocks flagged cached but %d keys in the map",
                                               cached, num_cached()));
  }
  if (parked != num_parked_) {
    return absl::InternalError(
        absl::StrFormat("%d blocks flagged parked but num_parked is %d", parked, num_parked_));
  }
  // Walk the LRU: every node parked, links symmetric, length == num_parked.
  int32_t length = 0;
  int32_t prev = kNil;
  for (int32_t b = lru_head_; b != kNil; b = entries_[b].lru_next) {
    if (++length > num_parked_) {
      return absl::InternalError(absl::StrFormat(
          "LRU list is longer than num_parked %d (or has a cycle)", num_parked_));
    }
    if (!entries_[b].parked) {
      return absl::InternalError(absl::StrFormat("LRU list holds block %d, not parked", b));
    }
    if (entries_[b].lru_prev != prev) {
      return absl::InternalError(absl::StrFormat(
          "LRU block %d has prev %d, expected %d", b, entries_[b].lru_prev, prev));
    }
    prev = b;
  }
  if (prev != lru_tail_ || length != num_parked_) {
    return absl::InternalError(absl::StrFormat(
        "LRU list has %d nodes ending at %d; expected %d ending at %d", length, prev,
        num_parked_, lru_tail_));
  }
  return absl::OkStatus();
}

}  // namespace tandem::kv
