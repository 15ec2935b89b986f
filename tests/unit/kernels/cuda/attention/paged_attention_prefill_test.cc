// PagedAttentionPrefill (kernels/cuda/attention/paged_attention_prefill.cu) under
// emulation against the CPU reference (kernels::PagedAttention at
// Isa::kReference) on random caches, in several execution orders: batches
// mixing whole prompts, chunks after cached prefix blocks (start_pos > 0) and
// single decode tokens, f32 and f16 caches, GQA and plain multi-head shapes.
// Tolerance: abs 1e-4 on outputs (convex combinations of values in [-1, 1];
// the kernel differs from the reference in summation order and the online
// softmax rescaling; the largest error seen is printed per case).
#include "kernels/cuda/attention/paged_attention_prefill.cuh"

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

struct PrefillRun {
  absl::Status status;
  float max_error = 0.0f;
};

PrefillRun RunPrefill(const AttentionShape& shape, const std::vector<SeqShape>& specs,
                      uint32_t seed) {
  std::mt19937 rng(seed);
  const HostAttention h = testing::BuildHostAttention(shape, specs, rng);
  std::vector<PagedAttentionSeq> seqs;
  int32_t max_q_len = 0;
  for (const kernels::AttentionSeq& s : h.seqs) {
    seqs.push_back({static_cast<int32_t>(s.q_begin), static_cast<int32_t>(s.q_len),
                    static_cast<int32_t>(s.start_pos)});
    max_q_len = std::max(max_q_len, static_cast<int32_t>(s.q_len));
  }
  testing::DeviceKvCache device(h);
  DeviceBuffer<float> q(h.q);
  DeviceBuffer<float> out(h.q.size());
  DeviceBuffer<int32_t> tables(h.block_tables);
  DeviceBuffer<PagedAttentionSeq> device_seqs(seqs);
  PagedAttentionPrefillParams params;
  params.q = q.get();
  params.out = out.get();
  params.seqs = device_seqs.get();
  params.block_tables = tables.get();
  params.num_seqs = static_cast<int32_t>(seqs.size());
  params.num_heads = shape.num_heads;
  params.max_blocks_per_seq = h.max_blocks_per_seq;
  params.max_q_len = max_q_len;
  params.scale = h.scale();
  PrefillRun run;
  run.status = PagedAttentionPrefill(params, device.cache, nullptr);
  if (!run.status.ok()) return run;
  run.max_error = testing::MaxAbsDiff(out.Download(), testing::ReferenceAttention(h));
  std::printf("prefill heads %d/%d dim %d block %d %s, %zu seqs, %lld tokens: max abs error %.3g\n",
              shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.block_size,
              shape.dtype == kernels::KvDtype::kF32 ? "f32" : "f16", specs.size(),
              static_cast<long long>(h.num_tokens), run.max_error);
  return run;
}

void ExpectPrefillMatches(const AttentionShape& shape, const std::vector<SeqShape>& specs,
                          uint32_t seed) {
  const PrefillRun run = RunPrefill(shape, specs, seed);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_LE(run.max_error, kTolerance);
}

// A whole prompt, a decode token, a chunk after 3 cached blocks, a chunk
// starting mid-block, a one-token prompt.
const std::vector<SeqShape> kMixedBatch = {{0, 37}, {100, 1}, {48, 20}, {5, 16}, {0, 1}};

class PagedAttentionPrefillTest : public cuda_emu::testing::OrderedTest {};

TEST_P(PagedAttentionPrefillTest, SmolLmMixedBatch) {
  ExpectPrefillMatches({9, 3, 64, 16, kernels::KvDtype::kF32}, kMixedBatch, 1);
  ExpectPrefillMatches({9, 3, 64, 16, kernels::KvDtype::kF16}, kMixedBatch, 2);
}

TEST_P(PagedAttentionPrefillTest, ChunkAfterLongCachedPrefix) {
  ExpectPrefillMatches({9, 3, 64, 16, kernels::KvDtype::kF32}, {{1500, 24}, {0, 3}}, 3);
}

TEST_P(PagedAttentionPrefillTest, OddShapes) {
  // 4 query heads per KV head, head_dim 40, blocks of 7.
  ExpectPrefillMatches({4, 1, 40, 7, kernels::KvDtype::kF32}, {{0, 23}, {13, 9}, {30, 1}}, 4);
  // Plain multi-head attention, wide heads.
  ExpectPrefillMatches({2, 2, 128, 16, kernels::KvDtype::kF16}, {{17, 19}, {0, 5}}, 5);
  // 8 heads per KV head at head_dim 256: one query token per block.
  ASSERT_EQ(PrefillQueryTile(8, 256), 1);
  ExpectPrefillMatches({8, 1, 256, 16, kernels::KvDtype::kF32}, {{3, 4}, {0, 2}}, 6);
}

INSTANTIATE_TEST_SUITE_P(Orders, PagedAttentionPrefillTest,
                         ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

TEST(PagedAttentionPrefillValidationTest, RejectsBadShapes) {
  const PrefillRun not_gqa = RunPrefill({9, 2, 64, 16, kernels::KvDtype::kF32}, {{0, 3}}, 7);
  EXPECT_EQ(not_gqa.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(not_gqa.status.message()).find("num_heads 9"), std::string::npos)
      << not_gqa.status;
  // 32 query heads of 256 dims: the queries alone fill 64 KiB.
  EXPECT_EQ(PrefillQueryTile(32, 256), 0);
  const PrefillRun big = RunPrefill({32, 1, 256, 16, kernels::KvDtype::kF32}, {{0, 1}}, 7);
  EXPECT_EQ(big.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(big.status.message()).find("head_dim 256"), std::string::npos)
      << big.status;
}

}  // namespace
}  // namespace tandem::cuda
