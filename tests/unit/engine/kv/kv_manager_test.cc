#include "engine/kv/kv_manager.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::kv {
namespace {

using Tokens = std::vector<int32_t>;

Tokens Range(int32_t begin, int32_t end) {
  Tokens tokens(end - begin);
  std::iota(tokens.begin(), tokens.end(), begin);
  return tokens;
}

std::vector<BlockId> Blocks(const KvManager& kv, SeqId seq) {
  std::span<const BlockId> blocks = kv.BlockTable(seq);
  return {blocks.begin(), blocks.end()};
}

Tokens SeqTokens(const KvManager& kv, SeqId seq) {
  std::span<const int32_t> tokens = kv.Tokens(seq);
  return {tokens.begin(), tokens.end()};
}

// Adds `seq` and appends the rest of its prompt; returns the cached count.
int32_t AddAndPrefill(KvManager& kv, SeqId seq, const Tokens& prompt) {
  int32_t cached = kv.AddSequence(seq, prompt);
  auto copies = kv.AppendTokens(seq, std::span<const int32_t>(prompt).subspan(cached));
  EXPECT_TRUE(copies.has_value());
  EXPECT_TRUE(copies->empty());
  return cached;
}

TEST(KvManagerConfigTest, Validation) {
  EXPECT_TRUE(ValidateKvManagerConfig({.num_blocks = 1, .block_size = 1}).ok());
  EXPECT_TRUE(ValidateKvManagerConfig({.num_blocks = 10, .block_size = 1024}).ok());
  absl::Status status = ValidateKvManagerConfig({.num_blocks = 0, .block_size = 16});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("num_blocks is 0"), std::string_view::npos) << status;
  status = ValidateKvManagerConfig({.num_blocks = 4, .block_size = 1025});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("1025"), std::string_view::npos) << status;
  EXPECT_NE(std::string(status.message()).find("1024"), std::string_view::npos) << status;
  EXPECT_FALSE(ValidateKvManagerConfig({.num_blocks = 4, .block_size = 0}).ok());
}

TEST(KvManagerTest, AppendAllocatesBlocksAndSlots) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  SeqId seq(1);
  EXPECT_EQ(kv.AddSequence(seq, Range(0, 6)), 0);
  EXPECT_EQ(kv.NumTokens(seq), 0);
  EXPECT_EQ(kv.NumBlocksNeeded(seq, 6), 2);
  ASSERT_TRUE(kv.AppendTokens(seq, Range(0, 6)).has_value());
  EXPECT_EQ(kv.NumTokens(seq), 6);
  EXPECT_EQ(Blocks(kv, seq), (std::vector<BlockId>{BlockId(0), BlockId(1)}));
  EXPECT_EQ(kv.Slot(seq, 0), 0);
  EXPECT_EQ(kv.Slot(seq, 5), 1 * 4 + 1);
  EXPECT_EQ(kv.NumBlocksNeeded(seq, 2), 0);
  EXPECT_EQ(kv.NumBlocksNeeded(seq, 3), 1);
  EXPECT_EQ(kv.num_free_blocks(), 6);
  EXPECT_TRUE(kv.CheckInvariants().ok());
}

TEST(KvManagerTest, PrefixHitReturnsCachedTokensAndSharesBlocks) {
  KvManager kv({.num_blocks = 16, .block_size = 4});
  const Tokens prompt = Range(100, 110);  // 2 full blocks + 2 tokens
  EXPECT_EQ(AddAndPrefill(kv, SeqId(1), prompt), 0);
  Tokens other = Range(100, 108);
  other.push_back(7);
  other.push_back(8);
  other.push_back(9);
  EXPECT_EQ(kv.AddSequence(SeqId(2), other), 8);
  EXPECT_EQ(kv.NumTokens(SeqId(2)), 8);
  EXPECT_EQ(SeqTokens(kv, SeqId(2)), Range(100, 108));
  std::vector<BlockId> b1 = Blocks(kv, SeqId(1));
  std::vector<BlockId> b2 = Blocks(kv, SeqId(2));
  ASSERT_EQ(b2.size(), 2u);
  EXPECT_EQ(b2[0], b1[0]);
  EXPECT_EQ(b2[1], b1[1]);
  // A prompt diverging in the second block hits only the first.
  Tokens diverge = Range(100, 104);
  for (int32_t t : {1, 2, 3, 4, 5}) diverge.push_back(t);
  EXPECT_EQ(kv.AddSequence(SeqId(3), diverge), 4);
  // Same tokens in block 2 but a different block 1: no hit at all.
  Tokens shifted = {0, 0, 0, 0};
  for (int32_t t : Range(104, 110)) shifted.push_back(t);
  EXPECT_EQ(kv.AddSequence(SeqId(4), shifted), 0);
  KvStats stats = kv.stats();
  EXPECT_EQ(stats.prefix_query_tokens, 10 + 11 + 9 + 10);
  EXPECT_EQ(stats.prefix_hit_tokens, 8 + 4);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, HitIsCappedBelowPromptLength) {
  KvManager kv({.num_blocks = 16, .block_size = 4});
  AddAndPrefill(kv, SeqId(1), Range(0, 9));
  // Exactly two full cached blocks: the last token must be recomputed, so
  // only the first block counts.
  EXPECT_EQ(kv.AddSequence(SeqId(2), Range(0, 8)), 4);
  EXPECT_EQ(kv.AddSequence(SeqId(3), Range(0, 9)), 8);
  EXPECT_EQ(kv.AddSequence(SeqId(4), Range(0, 1)), 0);
  EXPECT_EQ(kv.AddSequence(SeqId(5), Tokens{}), 0);
  EXPECT_TRUE(kv.CheckInvariants().ok());
}

TEST(KvManagerTest, DisabledPrefixCacheNeverHits) {
  KvManager kv({.num_blocks = 16, .block_size = 4, .enable_prefix_cache = false});
  AddAndPrefill(kv, SeqId(1), Range(0, 9));
  EXPECT_EQ(kv.AddSequence(SeqId(2), Range(0, 9)), 0);
  kv.Free(SeqId(1));
  EXPECT_EQ(kv.stats().num_blocks_cached, 0);
  EXPECT_EQ(kv.stats().num_blocks_free, 16);
  EXPECT_TRUE(kv.CheckInvariants().ok());
}

TEST(KvManagerTest, FreedCachedBlocksAreRevivedFromLru) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  AddAndPrefill(kv, SeqId(1), Range(0, 10));
  kv.Free(SeqId(1));
  KvStats stats = kv.stats();
  EXPECT_EQ(stats.num_blocks_cached, 2);  // two full blocks kept
  EXPECT_EQ(stats.num_blocks_free, 6);    // partial block freed
  EXPECT_EQ(stats.num_blocks_used, 0);
  EXPECT_EQ(kv.num_free_blocks(), 8);
  EXPECT_EQ(kv.AddSequence(SeqId(2), Range(0, 10)), 8);
  stats = kv.stats();
  EXPECT_EQ(stats.num_blocks_cached, 0);
  EXPECT_EQ(stats.num_blocks_used, 2);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, EvictsLeastRecentlyUsedCachedBlockWhenFreeListIsEmpty) {
  KvManager kv({.num_blocks = 4, .block_size = 2});
  // Three one-block sequences, freed in order A, B, C: LRU order A, B, C.
  AddAndPrefill(kv, SeqId(1), Tokens{1, 1});
  AddAndPrefill(kv, SeqId(2), Tokens{2, 2});
  AddAndPrefill(kv, SeqId(3), Tokens{3, 3});
  const BlockId block_a = Blocks(kv, SeqId(1))[0];
  const BlockId block_b = Blocks(kv, SeqId(2))[0];
  kv.Free(SeqId(1));
  kv.Free(SeqId(2));
  kv.Free(SeqId(3));
  EXPECT_EQ(kv.stats().num_blocks_cached, 3);
  EXPECT_EQ(kv.stats().num_blocks_free, 1);
  // Two new blocks: the free one, then A's (least recently used).
  kv.AddSequence(SeqId(4), Tokens{9});
  ASSERT_TRUE(kv.AppendTokens(SeqId(4), Tokens{9, 9, 9}).has_value());
  EXPECT_EQ(Blocks(kv, SeqId(4))[1], block_a);
  EXPECT_EQ(kv.stats().num_blocks_cached, 2);
  // A's content is gone from the cache; B and C still hit.
  EXPECT_EQ(kv.AddSequence(SeqId(5), Tokens{1, 1, 0}), 0);
  EXPECT_EQ(kv.AddSequence(SeqId(6), Tokens{2, 2, 0}), 2);
  EXPECT_EQ(Blocks(kv, SeqId(6))[0], block_b);
  EXPECT_EQ(kv.AddSequence(SeqId(7), Tokens{3, 3, 0}), 2);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, CapacityExhaustionReturnsNulloptWithoutChange) {
  KvManager kv({.num_blocks = 3, .block_size = 4});
  kv.AddSequence(SeqId(1), Range(0, 1));
  ASSERT_TRUE(kv.AppendTokens(SeqId(1), Range(0, 10)).has_value());
  kv.AddSequence(SeqId(2), Tokens{5});
  const std::vector<BlockId> before = Blocks(kv, SeqId(1));
  const KvStats stats_before = kv.stats();
  EXPECT_EQ(kv.NumBlocksNeeded(SeqId(1), 7), 2);
  EXPECT_FALSE(kv.AppendTokens(SeqId(1), Range(10, 17)).has_value());
  EXPECT_EQ(Blocks(kv, SeqId(1)), before);
  EXPECT_EQ(kv.NumTokens(SeqId(1)), 10);
  EXPECT_EQ(kv.stats().num_blocks_free, stats_before.num_blocks_free);
  EXPECT_EQ(kv.stats().num_blocks_used, stats_before.num_blocks_used);
  // What does fit still succeeds.
  EXPECT_TRUE(kv.AppendTokens(SeqId(1), Range(10, 12)).has_value());
  EXPECT_FALSE(kv.AppendTokens(SeqId(2), Tokens{1}).has_value());
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, ForkWithPartialBlockCopiesOnFirstWrite) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  AddAndPrefill(kv, SeqId(1), Range(0, 6));
  kv.Fork(SeqId(1), SeqId(2));
  EXPECT_EQ(Blocks(kv, SeqId(2)), Blocks(kv, SeqId(1)));
  EXPECT_EQ(SeqTokens(kv, SeqId(2)), Range(0, 6));
  EXPECT_EQ(kv.stats().num_blocks_used, 2);
  EXPECT_TRUE(kv.CheckInvariants().ok());
  const BlockId shared_partial = Blocks(kv, SeqId(1))[1];
  EXPECT_EQ(kv.NumBlocksNeeded(SeqId(2), 1), 1);
  auto copies = kv.AppendTokens(SeqId(2), Tokens{50});
  ASSERT_TRUE(copies.has_value());
  ASSERT_EQ(copies->size(), 1u);
  EXPECT_EQ((*copies)[0].src, shared_partial);
  const BlockId child_block = Blocks(kv, SeqId(2))[1];
  EXPECT_EQ((*copies)[0].dst, child_block);
  EXPECT_NE(child_block, shared_partial);
  EXPECT_EQ(Blocks(kv, SeqId(2))[0], Blocks(kv, SeqId(1))[0]);
  // The parent is the sole owner now: it writes in place, no copy.
  EXPECT_EQ(kv.NumBlocksNeeded(SeqId(1), 1), 0);
  copies = kv.AppendTokens(SeqId(1), Tokens{60});
  ASSERT_TRUE(copies.has_value());
  EXPECT_TRUE(copies->empty());
  EXPECT_EQ(Blocks(kv, SeqId(1))[1], shared_partial);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, ForkAtBlockBoundaryNeedsNoCopy) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  AddAndPrefill(kv, SeqId(1), Range(0, 8));
  kv.Fork(SeqId(1), SeqId(2));
  auto copies = kv.AppendTokens(SeqId(2), Tokens{1});
  ASSERT_TRUE(copies.has_value());
  EXPECT_TRUE(copies->empty());
  EXPECT_TRUE(kv.CheckInvariants().ok());
}

TEST(KvManagerTest, FreeOfForkedSequenceKeepsTheOthersBlocks) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  AddAndPrefill(kv, SeqId(1), Range(0, 6));
  kv.Fork(SeqId(1), SeqId(2));
  const std::vector<BlockId> blocks = Blocks(kv, SeqId(1));
  kv.Free(SeqId(1));
  EXPECT_FALSE(kv.Contains(SeqId(1)));
  EXPECT_TRUE(kv.Contains(SeqId(2)));
  EXPECT_EQ(Blocks(kv, SeqId(2)), blocks);
  EXPECT_EQ(kv.stats().num_blocks_used, 2);
  EXPECT_EQ(kv.stats().num_blocks_free, 6);
  // The survivor writes its (now unshared) partial block in place.
  auto copies = kv.AppendTokens(SeqId(2), Tokens{1});
  ASSERT_TRUE(copies.has_value());
  EXPECT_TRUE(copies->empty());
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, TruncateReleasesBlocksAndUnregistersPartialCachedBlock) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  AddAndPrefill(kv, SeqId(1), Range(0, 12));  // 3 full cached blocks
  const std::vector<BlockId> blocks = Blocks(kv, SeqId(1));
  EXPECT_EQ(kv.stats().num_blocks_used, 3);
  kv.Truncate(SeqId(1), 6);
  EXPECT_EQ(kv.NumTokens(SeqId(1)), 6);
  EXPECT_EQ(SeqTokens(kv, SeqId(1)), Range(0, 6));
  EXPECT_EQ(Blocks(kv, SeqId(1)), (std::vector<BlockId>{blocks[0], blocks[1]}));
  // Block 3 is released to the LRU (still cached, full content intact).
  EXPECT_EQ(kv.stats().num_blocks_used, 2);
  EXPECT_EQ(kv.stats().num_blocks_cached, 1);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
  // Block 2 was unregistered: a new prompt only hits block 1.
  EXPECT_EQ(kv.AddSequence(SeqId(2), Range(0, 13)), 4);
  // The sequence writes into its partial block in place.
  auto copies = kv.AppendTokens(SeqId(1), Tokens{99, 98});
  ASSERT_TRUE(copies.has_value());
  EXPECT_TRUE(copies->empty());
  EXPECT_EQ(Blocks(kv, SeqId(1))[1], blocks[1]);
  // And the rewritten block is registered with its new content.
  Tokens rewritten = Range(0, 6);
  rewritten.push_back(99);
  rewritten.push_back(98);
  rewritten.push_back(0);
  EXPECT_EQ(kv.AddSequence(SeqId(3), rewritten), 8);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, TruncateIntoSharedCachedBlockCopiesOnWrite) {
  KvManager kv({.num_blocks = 8, .block_size = 4});
  AddAndPrefill(kv, SeqId(1), Range(0, 8));
  EXPECT_EQ(kv.AddSequence(SeqId(2), Range(0, 9)), 8);
  const BlockId shared = Blocks(kv, SeqId(1))[1];
  kv.Truncate(SeqId(1), 5);
  auto copies = kv.AppendTokens(SeqId(1), Tokens{77});
  ASSERT_TRUE(copies.has_value());
  ASSERT_EQ(copies->size(), 1u);
  EXPECT_EQ((*copies)[0].src, shared);
  EXPECT_EQ(Blocks(kv, SeqId(2))[1], shared);
  // The cached content is unchanged: another prompt still hits it.
  EXPECT_EQ(kv.AddSequence(SeqId(3), Range(0, 9)), 8);
  EXPECT_EQ(Blocks(kv, SeqId(3))[1], shared);
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, TruncateToZeroAndRegrow) {
  KvManager kv({.num_blocks = 4, .block_size = 2});
  AddAndPrefill(kv, SeqId(1), Range(0, 5));
  kv.Truncate(SeqId(1), 0);
  EXPECT_EQ(kv.NumTokens(SeqId(1)), 0);
  EXPECT_TRUE(kv.BlockTable(SeqId(1)).empty());
  ASSERT_TRUE(kv.AppendTokens(SeqId(1), Range(10, 13)).has_value());
  EXPECT_EQ(SeqTokens(kv, SeqId(1)), Range(10, 13));
  EXPECT_TRUE(kv.CheckInvariants().ok()) << kv.CheckInvariants();
}

TEST(KvManagerTest, StatsAccountForEveryBlock) {
  KvManager kv({.num_blocks = 10, .block_size = 2});
  AddAndPrefill(kv, SeqId(1), Range(0, 5));  // 3 blocks, 2 full
  AddAndPrefill(kv, SeqId(2), Range(20, 24));  // 2 blocks
  kv.Free(SeqId(2));
  KvStats stats = kv.stats();
  EXPECT_EQ(stats.num_blocks_total, 10);
  EXPECT_EQ(stats.num_blocks_used, 3);
  EXPECT_EQ(stats.num_blocks_cached, 2);
  EXPECT_EQ(stats.num_blocks_free, 5);
  EXPECT_EQ(kv.num_free_blocks(), 7);
  EXPECT_EQ(stats.prefix_query_tokens, 9);
  EXPECT_EQ(stats.prefix_hit_tokens, 0);
}

TEST(KvManagerDeathTest, MisuseIsCaught) {
  KvManager kv({.num_blocks = 4, .block_size = 2});
  kv.AddSequence(SeqId(1), Tokens{1, 2});
  EXPECT_DEATH(kv.AddSequence(SeqId(1), Tokens{1}), "already exists");
  EXPECT_DEATH(kv.Free(SeqId(9)), "unknown sequence 9");
  EXPECT_DEATH(kv.Truncate(SeqId(1), 1), "out of range");
  EXPECT_DEATH(kv.Slot(SeqId(1), 0), "out of range");
  EXPECT_DEATH(kv.Fork(SeqId(1), SeqId(1)), "already exists");
  EXPECT_DEATH(KvManager({.num_blocks = 0, .block_size = 2}), "num_blocks is 0");
}

}  // namespace
}  // namespace tandem::kv
