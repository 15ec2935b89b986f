#include "engine/kv/block_table.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem::kv {
namespace {

TEST(BlockTableTest, TracksTokensBlocksAndChain) {
  BlockTable table(4);
  EXPECT_EQ(table.last_full_key(), PrefixCache::kRootKey);
  EXPECT_EQ(table.last_full_entry(), PrefixCache::kRootEntry);
  table.AddBlock(BlockId(7));
  for (int32_t t : {1, 2, 3, 4}) table.AddToken(t);
  table.AddLink({111, 5});
  table.AddBlock(BlockId(9));
  for (int32_t t : {5, 6}) table.AddToken(t);
  EXPECT_EQ(table.num_tokens(), 6);
  EXPECT_EQ(table.num_full_blocks(), 1);
  EXPECT_EQ(table.last_full_key(), 111u);
  EXPECT_EQ(table.last_full_entry(), 5u);
  std::span<const int32_t> second = table.BlockTokens(1);
  EXPECT_EQ(std::vector<int32_t>(second.begin(), second.end()), (std::vector<int32_t>{5, 6}));
  table.SetBlock(1, BlockId(3));
  EXPECT_EQ(table.blocks()[1], BlockId(3));

  table.TruncateTokens(3);
  EXPECT_EQ(table.num_tokens(), 3);
  EXPECT_TRUE(table.chain().empty());
  EXPECT_EQ(table.last_full_key(), PrefixCache::kRootKey);
  table.RemoveLastBlock();
  EXPECT_EQ(table.blocks().size(), 1u);
}

}  // namespace
}  // namespace tandem::kv
