#include "engine/kv/kv_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tandem::kv {
namespace {

int32_t CeilDiv(int64_t a, int32_t b) { return static_cast<int32_t>((a + b - 1) / b); }

}  // namespace

absl::Status ValidateKvManagerConfig(const KvManagerConfig& config) {
  if (config.num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KvManagerConfig.num_blocks is %d; must be >= 1", config.num_blocks));
  }
  if (config.block_size < 1 || config.block_size > kMaxBlockSize) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KvManagerConfig.block_size is %d; must be in [1, %d]", config.block_size, kMaxBlockSize));
  }
  return absl::OkStatus();
}

namespace {

const KvManagerConfig& CheckedConfig(const KvManagerConfig& config) {
  absl::Status status = ValidateKvManagerConfig(config);
  CHECK(status.ok(), "%s", status.ToString());
  return config;
}

}  // namespace

KvManager::KvManager(const KvManagerConfig& config)
    : config_(CheckedConfig(config)),
      pool_(config.num_blocks),
      cache_(config.num_blocks, config.block_size) {}

KvManager::Table& KvManager::MutableTable(SeqId seq) {
  auto it = tables_.find(seq);
  CHECK(it != tables_.end(), "unknown sequence %d", seq.value());
  return it->second;
}

const KvManager::Table& KvManager::GetTable(SeqId seq) const {
  auto it = tables_.find(seq);
  CHECK(it != tables_.end(), "unknown sequence %d", seq.value());
  return it->second;
}

std::optional<BlockId> KvManager::AllocateBlock() {
  if (std::optional<BlockId> block = pool_.Allocate()) return block;
  std::optional<BlockId> victim = cache_.EvictLru();
  if (!victim) return std::nullopt;
  pool_.IncRef(*victim);  // parked (ref 0) -> referenced
  return victim;
}

void KvManager::ReleaseBlock(BlockId block) {
  if (pool_.DecRef(block) > 0) return;
  if (cache_.IsCached(block)) {
    cache_.Park(block);
  } else {
    pool_.Release(block);
  }
}

int32_t KvManager::AddSequence(SeqId seq, std::span<const int32_t> prompt,
                               bool use_prefix_cache) {
  CHECK(!tables_.contains(seq), "sequence %d already exists", seq.value());
  Table table(config_.block_size);
  const int32_t bs = config_.block_size;
  if (!use_prefix_cache) {
    tables_.emplace(seq, std::move(table));
    return 0;
  }
  if (config_.enable_prefix_cache && prompt.size() > 1) {
    // The last prompt token is always recomputed, so at most
    // (size - 1) / bs blocks can be reused.
    const int64_t max_blocks = static_cast<int64_t>(prompt.size() - 1) / bs;
    for (int64_t i = 0; i < max_blocks; ++i) {
      std::span<const int32_t> tokens = prompt.subspan(i * bs, bs);
      uint64_t key = PrefixCache::ChainKey(table.last_full_key(), tokens);
      std::optional<PrefixCache::Match> match =
          cache_.Lookup(key, table.last_full_entry(), tokens);
      if (!match) break;
      if (cache_.IsParked(match->block)) cache_.Unpark(match->block);
      pool_.IncRef(match->block);
      table.AddBlock(match->block);
      for (int32_t token : tokens) table.AddToken(token);
      table.AddLink({key, match->entry});
    }
  }
  const int32_t hit = table.num_tokens();
  prefix_query_tokens_ += static_cast<int64_t>(prompt.size());
  prefix_hit_tokens_ += hit;
  tables_.emplace(seq, std::move(table));
  return hit;
}

int32_t KvManager::NumBlocksNeeded(SeqId seq, int32_t num_new_tokens) const {
  CHECK(num_new_tokens >= 0, "num_new_tokens %d must be >= 0", num_new_tokens);
  const Table& table = GetTable(seq);
  if (num_new_tokens == 0) return 0;
  const int64_t num_tokens = table.num_tokens();
  int32_t needed = CeilDiv(num_tokens + num_new_tokens, config_.block_size) -
                   static_cast<int32_t>(table.blocks().size());
  // Writing into a shared partial last block needs a private copy.
  if (num_tokens % config_.block_size != 0 && pool_.ref_count(table.blocks().back()) > 1) {
    ++needed;
  }
  return needed;
}

std::optional<std::vector<BlockCopy>> KvManager::AppendTokens(SeqId seq,
                                                              std::span<const int32_t> tokens) {
  Table& table = MutableTable(seq);
  std::vector<BlockCopy> copies;
  if (tokens.empty()) return copies;
  CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX - table.num_tokens()),
        "appending %d tokens to sequence %d overflows", static_cast<int64_t>(tokens.size()),
        seq.value());
  const int32_t needed = NumBlocksNeeded(seq, static_cast<int32_t>(tokens.size()));
  if (needed > num_free_blocks()) return std::nullopt;

  const int32_t bs = config_.block_size;
  if (table.num_tokens() % bs != 0) {
    const int32_t last_index = static_cast<int32_t>(table.blocks().size()) - 1;
    const BlockId last = table.blocks()[last_index];
    if (pool_.ref_count(last) > 1) {
      std::optional<BlockId> copy = AllocateBlock();
      CHECK(copy.has_value(), "capacity was checked: %d needed", needed);
      copies.push_back({last, *copy});
      pool_.DecRef(last);  // still referenced by the others
      table.SetBlock(last_index, *copy);
    } else if (cache_.IsCached(last)) {
      // Only this sequence uses it: drop the cache entry instead of copying,
      // since its content is about to change.
      cache_.Erase(last);
    }
  }
  for (int32_t token : tokens) {
    if (table.num_tokens() % bs == 0) {
      std::optional<BlockId> block = AllocateBlock();
      CHECK(block.has_value(), "capacity was checked: %d needed", needed);
      table.AddBlock(*block);
    }
    table.AddToken(token);
    if (table.num_tokens() % bs == 0) OnBlockFull(table);
  }
  return copies;
}

void KvManager::OnBlockFull(Table& table) {
  const int32_t index = table.num_full_blocks() - 1;
  if (!config_.enable_prefix_cache) {
    table.AddLink({0, PrefixCache::kNoEntry});
    return;
  }
  std::span<const int32_t> tokens = table.BlockTokens(index);
  const uint64_t key = PrefixCache::ChainKey(table.last_full_key(), tokens);
  const uint64_t entry =
      cache_.Insert(key, table.last_full_entry(), table.blocks()[index], tokens);
  table.AddLink({key, entry});
}

void KvManager::Fork(SeqId parent, SeqId child) {
  CHECK(!tables_.contains(child), "fork child %d already exists", child.value());
  Table copy = GetTable(parent);
  for (BlockId block : copy.blocks()) pool_.IncRef(block);
  tables_.emplace(child, std::move(copy));
}

void KvManager::Truncate(SeqId seq, int32_t num_tokens) {
  Table& table = MutableTable(seq);
  CHECK(num_tokens >= 0 && num_tokens <= table.num_tokens(),
        "truncate of sequence %d to %d tokens, out of range [0, %d]", seq.value(), num_tokens,
        table.num_tokens());
  const int32_t keep = CeilDiv(num_tokens, config_.block_size);
  while (static_cast<int32_t>(table.blocks().size()) > keep) {
    BlockId block = table.blocks().back();
    table.RemoveLastBlock();
    ReleaseBlock(block);
  }
  table.TruncateTokens(num_tokens);
  if (num_tokens % config_.block_size != 0) {
    const BlockId last = table.blocks().back();
    // A cached block must never be written. If others share it, the next
    // write copies it; if only this sequence holds it, unregister it now.
    if (cache_.IsCached(last) && pool_.ref_count(last) == 1) cache_.Erase(last);
  }
}

void KvManager::Free(SeqId seq) {
  auto it = tables_.find(seq);
  CHECK(it != tables_.end(), "unknown sequence %d", seq.value());
  std::span<const BlockId> blocks = it->second.blocks();
  // Last block first: the LRU then evicts tails before shared heads.
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) ReleaseBlock(*b);
  tables_.erase(it);
}

bool KvManager::Contains(SeqId seq) const { return tables_.contains(seq); }

std::span<const BlockId> KvManager::BlockTable(SeqId seq) const {
  return GetTable(seq).blocks();
}

std::span<const int32_t> KvManager::Tokens(SeqId seq) const { return GetTable(seq).tokens(); }

int32_t KvManager::NumTokens(SeqId seq) const { return GetTable(seq).num_tokens(); }

int64_t KvManager::Slot(SeqId seq, int32_t pos) const {
  const Table& table = GetTable(seq);
  CHECK(pos >= 0 && pos < table.num_tokens(), "position %d of sequence %d out of range [0, %d)",
        pos, seq.value(), table.num_tokens());
  const int32_t bs = config_.block_size;
  return static_cast<int64_t>(table.blocks()[pos / bs].value()) * bs + pos % bs;
}

KvStats KvManager::stats() const {
  KvStats stats;
  stats.num_blocks_total = pool_.num_blocks();
  stats.num_blocks_free = pool_.num_free();
  stats.num_blocks_used = pool_.num_used();
  stats.num_blocks_cached = cache_.num_parked();
  stats.prefix_query_tokens = prefix_query_tokens_;
  stats.prefix_hit_tokens = prefix_hit_tokens_;
  return stats;
}

absl::Status KvManager::CheckTable(SeqId seq, const Table& table) const {
  const int32_t bs = config_.block_size;
  const int32_t num_blocks = static_cast<int32_t>(table.blocks().size());
  if (num_blocks != CeilDiv(table.num_tokens(), bs)) {
    return absl::InternalError(absl::StrFormat(
        "sequence %d has %d tokens in %d blocks; expected %d blocks of %d", seq.value(),
        table.num_tokens(), num_blocks, CeilDiv(table.num_tokens(), bs), bs));
  }
  if (static_cast<int32_t>(table.chain().size()) != table.num_full_blocks()) {
    return absl::InternalError(
        absl::StrFormat("sequence %d has %d chain links for %d full blocks", seq.value(),
                        static_cast<int32_t>(table.chain().size()), table.num_full_blocks()));
  }
  uint64_t parent_key = PrefixCache::kRootKey;
  for (int32_t i = 0; i < num_blocks; ++i) {
    const BlockId block = table.blocks()[i];
    if (block.value() < 0 || block.value() >= pool_.num_blocks()) {
      return absl::InternalError(absl::StrFormat("sequence %d block %d is %d, out of range [0, %d)",
                                                 seq.value(), i, block.value(),
                                                 pool_.num_blocks()));
    }
    std::span<const int32_t> tokens = table.BlockTokens(i);
    const bool full = i < table.num_full_blocks();
    if (full && config_.enable_prefix_cache) {
      const uint64_t key = PrefixCache::ChainKey(parent_key, tokens);
      if (table.chain()[i].key != key) {
        return absl::InternalError(absl::StrFormat(
            "sequence %d block %d has chain key %#x; its tokens hash to %#x", seq.value(), i,
            table.chain()[i].key, key));
      }
      parent_key = key;
    }
    if (!cache_.IsCached(block)) continue;
    std::span<const int32_t> cached = cache_.TokensOf(block);
    if (!std::equal(tokens.begin(), tokens.end(), cached.begin())) {
      return absl::InternalError(absl::StrFormat(
          "sequence %d block %d (block %d): tokens differ from the prefix-cache entry",
          seq.value(), i, block.value()));
    }
    if (full && table.chain()[i].key != cache_.KeyOf(block)) {
      return absl::InternalError(absl::StrFormat(
          "sequence %d block %d (block %d) has chain key %#x but is cached under %#x",
          seq.value(), i, block.value(), table.chain()[i].key, cache_.KeyOf(block)));
    }
  }
  return absl::OkStatus();
}

absl::Status KvManager::CheckInvariants() const {
  RETURN_IF_ERROR(pool_.CheckConsistency());
  RETURN_IF_ERROR(cache_.CheckConsistency());
  const int32_t total = pool_.num_blocks();
  std::vector<int32_t> refs(total, 0);
  for (const auto& [seq, table] : tables_) {
    RETURN_IF_ERROR(CheckTable(seq, table));
    for (BlockId block : table.blocks()) ++refs[block.value()];
  }
  int32_t parked = 0;
  for (int32_t b = 0; b < total; ++b) {
    const BlockId block(b);
    const int32_t ref = pool_.ref_count(block);
    if (ref != refs[b]) {
      return absl::InternalError(absl::StrFormat(
          "block %d has ref count %d but %d table entries reference it", b, ref, refs[b]));
    }
    const bool is_free = pool_.IsFree(block);
    const bool cached = cache_.IsCached(block);
    const bool is_parked = cache_.IsParked(block);
    if (is_free && (ref > 0 || cached)) {
      return absl::InternalError(absl::StrFormat(
          "block %d is free but has ref count %d and cached=%d", b, ref, cached));
    }
    if (!is_free && ref == 0 && !is_parked) {
      return absl::InternalError(absl::StrFormat(
          "block %d is unreferenced, not free and not in the LRU (leaked)", b));
    }
    if (is_parked && ref > 0) {
      return absl::InternalError(
          absl::StrFormat("block %d is in the LRU but has ref count %d", b, ref));
    }
    if (cached && !config_.enable_prefix_cache) {
      return absl::InternalError(
          absl::StrFormat("block %d is cached but the prefix cache is disabled", b));
    }
    parked += is_parked ? 1 : 0;
  }
  if (pool_.num_free() + pool_.num_used() + cache_.num_parked() != total ||
      parked != cache_.num_parked()) {
    return absl::InternalError(absl::StrFormat(
        "free %d + used %d + cached-unreferenced %d (%d counted) != total %d", pool_.num_free(),
        pool_.num_used(), cache_.num_parked(), parked, total));
  }
  return absl::OkStatus();
}

}  // namespace tandem::kv
