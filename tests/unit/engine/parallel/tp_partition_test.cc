// PartitionForRank: even and uneven splits of KV-head groups and FFN columns.
#include "engine/parallel/tp_partition.h"

#include "gtest/gtest.h"

namespace tandem::parallel {
namespace {

// SmolLM2-135M's dimensions: 9 query heads over 3 KV heads, FFN 1536.
TpDims SmolDims() {
  TpDims c;
  c.ffn_dim = 1536;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  return c;
}

TEST(TpPartitionTest, WorldOfOneIsTheWholeModel) {
  TpShard s = *PartitionForRank(SmolDims(), 0, 1);
  EXPECT_EQ(s.kv_head_begin, 0);
  EXPECT_EQ(s.kv_head_end, 3);
  EXPECT_EQ(s.q_head_begin, 0);
  EXPECT_EQ(s.q_head_end, 9);
  EXPECT_EQ(s.ffn_begin, 0);
  EXPECT_EQ(s.ffn_end, 1536);
}

TEST(TpPartitionTest, ThreeKvHeadsOverTwoRanksIsTwoPlusOne) {
  TpShard a = *PartitionForRank(SmolDims(), 0, 2);
  TpShard b = *PartitionForRank(SmolDims(), 1, 2);
  EXPECT_EQ(a.num_kv_heads(), 2);
  EXPECT_EQ(a.q_head_begin, 0);
  EXPECT_EQ(a.q_head_end, 6);
  EXPECT_EQ(b.kv_head_begin, 2);
  EXPECT_EQ(b.kv_head_end, 3);
  EXPECT_EQ(b.q_head_begin, 6);
  EXPECT_EQ(b.q_head_end, 9);
  EXPECT_EQ(a.ffn_begin, 0);
  EXPECT_EQ(a.ffn_end, 768);
  EXPECT_EQ(b.ffn_begin, 768);
  EXPECT_EQ(b.ffn_end, 1536);
}

TEST(TpPartitionTest, UnevenFfnSplitIsBlockAlignedAndCoversEverything) {
  TpDims c = SmolDims();
  c.ffn_dim = 32 * 7 + 16;  // 7 whole blocks and a partial one
  int expected_begin = 0;
  for (int r = 0; r < 3; ++r) {
    TpShard s = *PartitionForRank(c, r, 3);
    EXPECT_EQ(s.ffn_begin, expected_begin);
    EXPECT_EQ(s.ffn_begin % kTpFfnAlignment, 0);
    EXPECT_GT(s.ffn_size(), 0);
    expected_begin = s.ffn_end;
  }
  EXPECT_EQ(expected_begin, c.ffn_dim);
  // 7 blocks over 3 ranks: 3 + 2 + 2 (+ the partial block on the last).
  EXPECT_EQ(PartitionForRank(c, 0, 3)->ffn_size(), 96);
  EXPECT_EQ(PartitionForRank(c, 2, 3)->ffn_size(), 80);
}

TEST(TpPartitionTest, RejectsMoreRanksThanKvHeads) {
  absl::StatusOr<TpShard> s = PartitionForRank(SmolDims(), 0, 4);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("world size 4"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("3 KV heads"), std::string::npos) << s.status();
}

TEST(TpPartitionTest, RejectsBadRankAndWorldSize) {
  EXPECT_EQ(PartitionForRank(SmolDims(), 2, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionForRank(SmolDims(), -1, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionForRank(SmolDims(), 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::parallel
