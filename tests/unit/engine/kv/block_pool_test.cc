#include "engine/kv/block_pool.h"

#include <set>

#include "gtest/gtest.h"

namespace tandem::kv {
namespace {

TEST(BlockPoolTest, AllocatesEveryBlockOnceThenRunsOut) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_blocks(), 4);
  EXPECT_EQ(pool.num_free(), 4);
  std::set<int32_t> ids;
  for (int i = 0; i < 4; ++i) {
    std::optional<BlockId> block = pool.Allocate();
    ASSERT_TRUE(block.has_value());
    EXPECT_EQ(pool.ref_count(*block), 1);
    EXPECT_FALSE(pool.IsFree(*block));
    ids.insert(block->value());
  }
  EXPECT_EQ(ids, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_FALSE(pool.Allocate().has_value());
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.num_used(), 4);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolTest, LowestIdFirstAndReleasedBlockIsReused) {
  BlockPool pool(3);
  EXPECT_EQ(pool.Allocate()->value(), 0);
  EXPECT_EQ(pool.Allocate()->value(), 1);
  EXPECT_EQ(pool.DecRef(BlockId(0)), 0);
  EXPECT_EQ(pool.num_used(), 1);
  // Parked: neither free nor used until released.
  EXPECT_FALSE(pool.IsFree(BlockId(0)));
  EXPECT_EQ(pool.num_free(), 1);
  pool.Release(BlockId(0));
  EXPECT_TRUE(pool.IsFree(BlockId(0)));
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.Allocate()->value(), 0);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolTest, RefCounting) {
  BlockPool pool(2);
  BlockId block = *pool.Allocate();
  pool.IncRef(block);
  pool.IncRef(block);
  EXPECT_EQ(pool.ref_count(block), 3);
  EXPECT_EQ(pool.num_used(), 1);
  EXPECT_EQ(pool.DecRef(block), 2);
  EXPECT_EQ(pool.DecRef(block), 1);
  EXPECT_EQ(pool.DecRef(block), 0);
  EXPECT_EQ(pool.num_used(), 0);
  // A parked block can be revived.
  pool.IncRef(block);
  EXPECT_EQ(pool.ref_count(block), 1);
  EXPECT_EQ(pool.num_used(), 1);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolDeathTest, MisuseIsCaught) {
  BlockPool pool(2);
  EXPECT_DEATH(pool.IncRef(BlockId(0)), "free list");
  EXPECT_DEATH(pool.DecRef(BlockId(1)), "ref count 0");
  EXPECT_DEATH(pool.ref_count(BlockId(2)), "out of range");
  BlockId block = *pool.Allocate();
  EXPECT_DEATH(pool.Release(block), "ref count 1");
}

}  // namespace
}  // namespace tandem::kv
