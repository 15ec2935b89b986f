#include "engine/kv/prefix_cache.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::kv {
namespace {

using Tokens = std::vector<int32_t>;

TEST(PrefixCacheTest, ChainKeyDependsOnParentTokensAndOrder) {
  const Tokens a = {1, 2, 3, 4};
  EXPECT_EQ(PrefixCache::ChainKey(PrefixCache::kRootKey, a),
            PrefixCache::ChainKey(PrefixCache::kRootKey, a));
  std::set<uint64_t> keys;
  keys.insert(PrefixCache::ChainKey(PrefixCache::kRootKey, a));
  keys.insert(PrefixCache::ChainKey(PrefixCache::kRootKey + 1, a));
  keys.insert(PrefixCache::ChainKey(PrefixCache::kRootKey, Tokens{2, 1, 3, 4}));
  keys.insert(PrefixCache::ChainKey(PrefixCache::kRootKey, Tokens{1, 2, 3}));
  keys.insert(PrefixCache::ChainKey(PrefixCache::kRootKey, Tokens{1, 2, 3, 0}));
  keys.insert(PrefixCache::ChainKey(PrefixCache::kRootKey, Tokens{1, 2, 3, 4, 0}));
  keys.insert(PrefixCache::ChainKey(PrefixCache::kRootKey, Tokens{-1, 2, 3, 4}));
  EXPECT_EQ(keys.size(), 7u);
}

TEST(PrefixCacheTest, ChainKeyIsStableAcrossBuilds) {
  // Golden values (computed independently from the documented mix): keys are
  // compared across processes (router prefix affinity), so they must never
  // depend on the process, the platform or the Abseil version.
  EXPECT_EQ(PrefixCache::ChainKey(PrefixCache::kRootKey, Tokens{1, 2, 3, 4}),
            0x5fd51a016999fcc8ULL);
  EXPECT_EQ(PrefixCache::ChainKey(12345, Tokens{7, -3, 11}), 0x19f296bf35fe5ca6ULL);
}

TEST(PrefixCacheTest, ChainKeysOfManyBlocksAreDistinct) {
  std::set<uint64_t> keys;
  for (int32_t x = 0; x < 200; ++x) {
    for (int32_t y = 0; y < 200; ++y) {
      keys.insert(PrefixCache::ChainKey(PrefixCache::kRootKey, Tokens{x, y}));
    }
  }
  EXPECT_EQ(keys.size(), 40000u);
}

TEST(PrefixCacheTest, InsertThenLookup) {
  PrefixCache cache(8, 2);
  const Tokens t0 = {5, 6};
  const Tokens t1 = {7, 8};
  uint64_t k0 = PrefixCache::ChainKey(PrefixCache::kRootKey, t0);
  uint64_t e0 = cache.Insert(k0, PrefixCache::kRootEntry, BlockId(3), t0);
  ASSERT_NE(e0, PrefixCache::kNoEntry);
  uint64_t k1 = PrefixCache::ChainKey(k0, t1);
  uint64_t e1 = cache.Insert(k1, e0, BlockId(4), t1);
  ASSERT_NE(e1, PrefixCache::kNoEntry);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(cache.num_cached(), 2);
  EXPECT_TRUE(cache.IsCached(BlockId(3)));
  EXPECT_EQ(cache.KeyOf(BlockId(4)), k1);
  EXPECT_EQ(cache.EntryOf(BlockId(4)), e1);

  auto m0 = cache.Lookup(k0, PrefixCache::kRootEntry, t0);
  ASSERT_TRUE(m0.has_value());
  EXPECT_EQ(m0->block, BlockId(3));
  EXPECT_EQ(m0->entry, e0);
  auto m1 = cache.Lookup(k1, m0->entry, t1);
  ASSERT_TRUE(m1.has_value());
  EXPECT_EQ(m1->block, BlockId(4));
  EXPECT_FALSE(cache.Lookup(k1 + 1, e0, t1).has_value());
  EXPECT_TRUE(cache.CheckConsistency().ok());
}

TEST(PrefixCacheTest, CollisionsNeverMatchWrongContent) {
  PrefixCache cache(8, 2);
  const Tokens t0 = {5, 6};
  const uint64_t key = 42;  // pretend two different contents hash to 42
  uint64_t e0 = cache.Insert(key, PrefixCache::kRootEntry, BlockId(0), t0);
  // Same key, different tokens: no match.
  EXPECT_FALSE(cache.Lookup(key, PrefixCache::kRootEntry, Tokens{5, 7}).has_value());
  // Same key and tokens but a different parent: no match.
  EXPECT_FALSE(cache.Lookup(key, e0 + 100, t0).has_value());
  EXPECT_FALSE(cache.Lookup(key, PrefixCache::kNoEntry, t0).has_value());
  // Inserting different content under a taken key leaves the block uncached.
  EXPECT_EQ(cache.Insert(key, PrefixCache::kRootEntry, BlockId(1), Tokens{9, 9}),
            PrefixCache::kNoEntry);
  EXPECT_FALSE(cache.IsCached(BlockId(1)));
  // Duplicate content: the existing entry represents it; the block stays uncached.
  EXPECT_EQ(cache.Insert(key, PrefixCache::kRootEntry, BlockId(2), t0), e0);
  EXPECT_FALSE(cache.IsCached(BlockId(2)));
  // A broken chain is never registered.
  EXPECT_EQ(cache.Insert(77, PrefixCache::kNoEntry, BlockId(3), t0), PrefixCache::kNoEntry);
  EXPECT_FALSE(cache.IsCached(BlockId(3)));
  EXPECT_EQ(cache.num_cached(), 1);
  EXPECT_TRUE(cache.CheckConsistency().ok());
}

TEST(PrefixCacheTest, EvictedParentNeverMatchesALaterOne) {
  PrefixCache cache(8, 1);
  uint64_t e_parent = cache.Insert(10, PrefixCache::kRootEntry, BlockId(0), Tokens{1});
  cache.Insert(11, e_parent, BlockId(1), Tokens{2});
  cache.Park(BlockId(0));
  ASSERT_EQ(cache.EvictLru(), BlockId(0));
  // New content registered under the old parent's key gets a new entry id,
  // so the orphaned child is unreachable from it.
  uint64_t e_new = cache.Insert(10, PrefixCache::kRootEntry, BlockId(2), Tokens{1});
  EXPECT_NE(e_new, e_parent);
  EXPECT_FALSE(cache.Lookup(11, e_new, Tokens{2}).has_value());
  EXPECT_TRUE(cache.Lookup(11, e_parent, Tokens{2}).has_value());
}

TEST(PrefixCacheTest, LruEvictsLeastRecentlyParked) {
  PrefixCache cache(8, 1);
  for (int32_t b = 0; b < 4; ++b) {
    cache.Insert(100 + b, PrefixCache::kRootEntry, BlockId(b), Tokens{b});
  }
  cache.Park(BlockId(2));
  cache.Park(BlockId(0));
  cache.Park(BlockId(3));
  cache.Park(BlockId(1));
  EXPECT_EQ(cache.num_parked(), 4);
  EXPECT_EQ(cache.LruOrder(), (std::vector<BlockId>{BlockId(2), BlockId(0), BlockId(3), BlockId(1)}));
  // Revive 0, park it again: it becomes most recent.
  cache.Unpark(BlockId(0));
  EXPECT_FALSE(cache.IsParked(BlockId(0)));
  EXPECT_TRUE(cache.CheckConsistency().ok());
  cache.Park(BlockId(0));
  EXPECT_EQ(cache.EvictLru(), BlockId(2));
  EXPECT_FALSE(cache.IsCached(BlockId(2)));
  EXPECT_FALSE(cache.Lookup(102, PrefixCache::kRootEntry, Tokens{2}).has_value());
  EXPECT_EQ(cache.EvictLru(), BlockId(3));
  EXPECT_EQ(cache.EvictLru(), BlockId(1));
  EXPECT_EQ(cache.EvictLru(), BlockId(0));
  EXPECT_FALSE(cache.EvictLru().has_value());
  EXPECT_EQ(cache.num_cached(), 0);
  EXPECT_TRUE(cache.CheckConsistency().ok());
}

TEST(PrefixCacheTest, EraseUnregisters) {
  PrefixCache cache(4, 1);
  cache.Insert(5, PrefixCache::kRootEntry, BlockId(1), Tokens{9});
  cache.Erase(BlockId(1));
  EXPECT_FALSE(cache.IsCached(BlockId(1)));
  EXPECT_FALSE(cache.Lookup(5, PrefixCache::kRootEntry, Tokens{9}).has_value());
  // The key is free again.
  EXPECT_NE(cache.Insert(5, PrefixCache::kRootEntry, BlockId(2), Tokens{9}), PrefixCache::kNoEntry);
  EXPECT_TRUE(cache.CheckConsistency().ok());
}

}  // namespace
}  // namespace tandem::kv
