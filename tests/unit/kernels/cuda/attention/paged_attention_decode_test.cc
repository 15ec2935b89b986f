// PagedAttentionDecode (kernels/cuda/attention/paged_attention_decode.cu) under
// emulation against the CPU reference (kernels::PagedAttention at
// Isa::kReference) on random caches, in several execution orders: one query
// token per sequence at position context_len - 1, single-partition and
// split-K launches, f32 and f16 caches, GQA and plain multi-head shapes.
// Tolerance: abs 1e-4 on outputs (outputs are convex combinations of values
// in [-1, 1]; the kernel differs from the reference only in summation order
// and the split-K merge; the largest error seen is printed per case).
#include "kernels/cuda/attention/paged_attention_decode.cuh"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/kernels/cuda/attention/paged_attention_test_util.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;
using testing::AttentionShape;
using testing::HostAttention;
using testing::SeqShape;

constexpr float kTolerance = 1e-4f;

struct DecodeRun {
  absl::Status status;
  float max_error = 0.0f;
};

// Decodes one token for each context length and compares with the reference.
DecodeRun RunDecode(const AttentionShape& shape, const std::vector<int32_t>& context_lens,
                    int32_t partition_size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<SeqShape> specs;
  int32_t max_len = 0;
  for (int32_t len : context_lens) {
    specs.push_back({len - 1, 1});
    max_len = std::max(max_len, len);
  }
  const HostAttention h = testing::BuildHostAttention(shape, specs, rng);
  testing::DeviceKvCache device(h);
  DeviceBuffer<float> q(h.q);
  DeviceBuffer<float> out(h.q.size());
  DeviceBuffer<int32_t> tables(h.block_tables);
  DeviceBuffer<int32_t> lens(context_lens);
  PagedAttentionDecodeParams params;
  params.q = q.get();
  params.out = out.get();
  params.block_tables = tables.get();
  params.context_lens = lens.get();
  params.num_seqs = static_cast<int32_t>(context_lens.size());
  params.num_heads = shape.num_heads;
  params.max_blocks_per_seq = h.max_blocks_per_seq;
  params.max_context_len = max_len;
  params.partition_size = partition_size;
  params.scale = h.scale();
  const absl::StatusOr<int64_t> bytes = PagedAttentionDecodeWorkspaceBytes(params, device.cache);
  if (!bytes.ok()) return {bytes.status()};
  DeviceBuffer<uint8_t> workspace(std::max<int64_t>(*bytes, 1));
  params.workspace = *bytes > 0 ? workspace.get() : nullptr;
  DecodeRun run;
  run.status = PagedAttentionDecode(params, device.cache, nullptr);
  if (!run.status.ok()) return run;
  run.max_error = testing::MaxAbsDiff(out.Download(), testing::ReferenceAttention(h));
  std::printf("decode heads %d/%d dim %d block %d %s partition %d max_len %d: max abs error %.3g\n",
              shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.block_size,
              shape.dtype == kernels::KvDtype::kF32 ? "f32" : "f16", partition_size, max_len,
              run.max_error);
  return run;
}

void ExpectDecodeMatches(const AttentionShape& shape, const std::vector<int32_t>& context_lens,
                         int32_t partition_size, uint32_t seed) {
  const DecodeRun run = RunDecode(shape, context_lens, partition_size, seed);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_LE(run.max_error, kTolerance) << "partition_size " << partition_size;
}

class PagedAttentionDecodeTest : public cuda_emu::testing::OrderedTest {};

TEST_P(PagedAttentionDecodeTest, SmolLmShapesInOnePartition) {
  for (kernels::KvDtype dtype : {kernels::KvDtype::kF32, kernels::KvDtype::kF16}) {
    ExpectDecodeMatches({9, 3, 64, 16, dtype}, {1, 17, 100, 33}, kDefaultDecodePartitionSize, 1);
  }
}

TEST_P(PagedAttentionDecodeTest, SplitKMergesPartitions) {
  // Partitions of 64 keys: 1, 2, 4 and 5 of them, the last ones partial;
  // sequences shorter than the longest leave partitions empty.
  ExpectDecodeMatches({9, 3, 64, 16, kernels::KvDtype::kF32}, {64, 65, 200, 300, 5}, 64, 2);
  ExpectDecodeMatches({9, 3, 64, 16, kernels::KvDtype::kF16}, {130, 7}, 64, 3);
}

TEST_P(PagedAttentionDecodeTest, LongContextSplitK) {
  // 2000 keys in 4 partitions of the default 512, next to a short sequence.
  ExpectDecodeMatches({9, 3, 64, 16, kernels::KvDtype::kF32}, {2000, 3},
                      kDefaultDecodePartitionSize, 4);
}

TEST_P(PagedAttentionDecodeTest, OddShapes) {
  // Group of 4 query heads per KV head, head_dim not a multiple of 32, blocks
  // of 7, partitions not a multiple of the key tile.
  ExpectDecodeMatches({4, 1, 40, 7, kernels::KvDtype::kF32}, {1, 50, 51, 149}, 50, 5);
  // Plain multi-head attention with wide heads.
  ExpectDecodeMatches({2, 2, 128, 16, kernels::KvDtype::kF16}, {90, 33}, 32, 6);
}

INSTANTIATE_TEST_SUITE_P(Orders, PagedAttentionDecodeTest,
                         ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

TEST(PagedAttentionDecodeValidationTest, RejectsBadShapes) {
  const DecodeRun not_gqa = RunDecode({9, 2, 64, 16, kernels::KvDtype::kF32}, {5}, 512, 7);
  EXPECT_EQ(not_gqa.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(not_gqa.status.message()).find("num_heads 9"), std::string::npos)
      << not_gqa.status;
  const DecodeRun wide = RunDecode({1, 1, 512, 16, kernels::KvDtype::kF32}, {5}, 512, 7);
  EXPECT_EQ(wide.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(wide.status.message()).find("head_dim 512"), std::string::npos)
      << wide.status;
  // 8 query heads per KV head, 256 dims, 4096-key partitions: far past 48 KiB.
  const DecodeRun big = RunDecode({8, 1, 256, 16, kernels::KvDtype::kF32}, {5}, 4096, 7);
  EXPECT_EQ(big.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(big.status.message()).find("partition_size 4096"), std::string::npos)
      << big.status;
}

}  // namespace
}  // namespace tandem::cuda
