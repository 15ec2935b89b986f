// BlockTable: one sequence's view of the paged KV cache — the blocks holding
// its tokens in order, the tokens themselves (needed to key blocks in the
// prefix cache as they fill) and the prefix-cache chain of its full blocks.
// Plain data; KvManager keeps it consistent with the BlockPool.
//
// Invariants maintained by KvManager: blocks().size() ==
// ceil(num_tokens / block_size); chain().size() == num_tokens / block_size.
//
// Thread-safety: not thread-safe; owned by KvManager.
#ifndef TANDEM_ENGINE_KV_BLOCK_TABLE_H_
#define TANDEM_ENGINE_KV_BLOCK_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "common/logging.h"
#include "common/strong_id.h"
#include "engine/kv/prefix_cache.h"

namespace tandem::kv {

class BlockTable {
 public:
  // Prefix-cache identity of one full block of the sequence.
  struct ChainLink {
    uint64_t key = 0;    // PrefixCache::ChainKey over the sequence up to this block
    uint64_t entry = 0;  // cache entry holding this content, or PrefixCache::kNoEntry
  };

  explicit BlockTable(int32_t block_size) : block_size_(block_size) {
    CHECK(block_size >= 1, "block_size %d must be >= 1", block_size);
  }

  int32_t block_size() const { return block_size_; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_full_blocks() const { return num_tokens() / block_size_; }
  std::span<const BlockId> blocks() const { return blocks_; }
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const ChainLink> chain() const { return chain_; }

  // Tokens stored in block `index` of this table (block_size of them for a
  // full block, fewer for the last partial one). CHECKs the index.
  std::span<const int32_t> BlockTokens(int32_t index) const {
    CHECK(index >= 0 && index < static_cast<int32_t>(blocks_.size()),
          "block index %d out of range [0, %d)", index, static_cast<int32_t>(blocks_.size()));
    size_t begin = static_cast<size_t>(index) * block_size_;
    size_t end = std::min(tokens_.size(), begin + block_size_);
    return std::span<const int32_t>(tokens_).subspan(begin, end - begin);
  }

  // Chain key / entry of the last full block: the parent of the next one.
  uint64_t last_full_key() const {
    return chain_.empty() ? PrefixCache::kRootKey : chain_.back().key;
  }
  uint64_t last_full_entry() const {
    return chain_.empty() ? PrefixCache::kRootEntry : chain_.back().entry;
  }

  // Mutators used by KvManager; they do not touch ref counts.
  void AddBlock(BlockId block) { blocks_.push_back(block); }
  void SetBlock(int32_t index, BlockId block) { blocks_.at(index) = block; }
  void RemoveLastBlock() { blocks_.pop_back(); }
  void AddToken(int32_t token) { tokens_.push_back(token); }
  void AddLink(ChainLink link) { chain_.push_back(link); }
  // Keeps the first `num_tokens` tokens and the links of the full blocks
  // among them; blocks are removed separately (their refs must be dropped).
  void TruncateTokens(int32_t num_tokens) {
    CHECK(num_tokens >= 0 && num_tokens <= this->num_tokens(),
          "truncate to %d tokens out of range [0, %d]", num_tokens, this->num_tokens());
    tokens_.resize(num_tokens);
    chain_.resize(num_tokens / block_size_);
  }

 private:
  int32_t block_size_;
  std::vector<BlockId> blocks_;
  std::vector<int32_t> tokens_;
  std::vector<ChainLink> chain_;  // one per full block
};

}  // namespace tandem::kv

#endif  // TANDEM_ENGINE_KV_BLOCK_TABLE_H_
