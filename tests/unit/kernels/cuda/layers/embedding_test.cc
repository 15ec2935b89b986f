// EmbeddingGather (kernels/cuda/layers/embedding.cu) under emulation against
// kernels::DequantizeRowRef, in several execution orders. Tolerance: none,
// every output float must have the reference's bits.
#include "kernels/cuda/layers/embedding.cuh"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/dequantize_ref.h"
#include "kernels/ggml_type.h"
#include "tests/unit/kernels/cuda/cuda_kernel_test_util.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace tandem::cuda {
namespace {

using cuda_emu::testing::DeviceBuffer;
using gguf::GgmlType;

struct Table {
  GgmlType type;
  int64_t vocab, dim, row_bytes;
  std::vector<uint8_t> data;
};

Table MakeTable(GgmlType type, int64_t vocab, int64_t dim, unsigned seed) {
  std::mt19937 rng(seed);
  const int64_t row_bytes = testing::PaddedRowBytes(type, dim);
  return {type, vocab, dim, row_bytes,
          kernels::testing::RandomWeights(rng, type, vocab, dim, row_bytes)};
}

// Gathers `ids` on the device and checks each row's bits against the
// reference; an id outside the table must give a NaN row.
void ExpectGatherMatches(const Table& t, const std::vector<int32_t>& ids) {
  SCOPED_TRACE(::testing::Message()
               << gguf::TypeName(t.type) << " vocab " << t.vocab << " dim " << t.dim);
  DeviceBuffer<uint8_t> table(t.data);
  DeviceBuffer<int32_t> device_ids(ids);
  DeviceBuffer<float> out(ids.size() * t.dim);
  const kernels::WeightView view{t.type, table.get(), t.vocab, t.dim, t.row_bytes};
  ASSERT_TRUE(EmbeddingGather(view, device_ids.get(), ids.size(), out.get(), nullptr).ok());
  const std::vector<float> got = out.Download();
  std::vector<float> expected(t.dim);
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* row = got.data() + i * t.dim;
    if (ids[i] < 0 || ids[i] >= t.vocab) {
      for (int64_t e = 0; e < t.dim; ++e) ASSERT_TRUE(std::isnan(row[e])) << "id " << ids[i];
      continue;
    }
    kernels::DequantizeRowRef(t.type, t.data.data() + ids[i] * t.row_bytes, t.dim, expected.data());
    ASSERT_EQ(std::memcmp(row, expected.data(), t.dim * sizeof(float)), 0)
        << "token " << i << " id " << ids[i];
  }
}

constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                               GgmlType::kBF16, GgmlType::kF16,  GgmlType::kF32};

class EmbeddingTest : public cuda_emu::testing::OrderedTest {};
class EmbeddingSmolLmTest : public cuda_emu::testing::OrderedTest {};

// SmolLM2-135M's table (vocab 49152, hidden 576) of `type`, made once per
// process: generating it costs more than gathering from it in every order.
const Table& SmolLmTable(GgmlType type) {
  static auto* tables = new std::map<GgmlType, Table>;
  auto it = tables->find(type);
  if (it == tables->end()) it = tables->emplace(type, MakeTable(type, 49152, 576, 3)).first;
  return it->second;
}

// A prefill-sized batch with the first and last ids and repeats. F16 and F32
// differ from BF16 only in the element decode, which the small tables cover.
TEST_P(EmbeddingSmolLmTest, MatchesReferenceBits) {
  std::mt19937 rng(11);
  std::vector<int32_t> ids = {0, 49151, 7, 7};
  for (int i = 0; i < 33; ++i) ids.push_back(static_cast<int32_t>(rng() % 49152));
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kBF16}) {
    ExpectGatherMatches(SmolLmTable(type), ids);
  }
}

// A dim that is not a multiple of the thread count (and, for the plain
// types, not of 32), a single token, and ids outside the table.
TEST_P(EmbeddingTest, OddShapesAndBadIds) {
  for (GgmlType type : kTypes) {
    const int64_t dim = kernels::WeightBlockElems(type) == 1 ? 77 : 32 * 11;
    const Table t = MakeTable(type, 50, dim, 5);
    ExpectGatherMatches(t, {49});
    ExpectGatherMatches(t, {3, -1, 50, 0, 1 << 30, 49});
  }
}

TEST_P(EmbeddingTest, RejectsBadViews) {
  DeviceBuffer<uint8_t> table(4096);
  DeviceBuffer<int32_t> ids(std::vector<int32_t>{0});
  DeviceBuffer<float> out(64);
  auto gather = [&](GgmlType type, int64_t cols, int64_t row_bytes, int64_t num_tokens) {
    const kernels::WeightView view{type, table.get(), 4, cols, row_bytes};
    return EmbeddingGather(view, ids.get(), num_tokens, out.get(), nullptr);
  };
  EXPECT_EQ(gather(GgmlType::kQ4_K, 256, 144, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gather(GgmlType::kQ8_0, 48, 34, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gather(GgmlType::kQ8_0, 64, 67, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gather(GgmlType::kQ8_0, 64, 68, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gather(GgmlType::kF32, 16, 66, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gather(GgmlType::kF16, 16, 33, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(gather(GgmlType::kQ8_0, 64, 68, 0).ok());
  const absl::Status status = gather(GgmlType::kQ6_K, 256, 210, 1);
  EXPECT_NE(status.message().find("Q6_K"), std::string::npos) << status;
}

INSTANTIATE_TEST_SUITE_P(Orders, EmbeddingSmolLmTest, ::testing::ValuesIn(testing::FewOrders()),
                         cuda_emu::testing::OrderTestName);
INSTANTIATE_TEST_SUITE_P(Orders, EmbeddingTest,
                         ::testing::ValuesIn(cuda_emu::testing::TestOrders()),
                         cuda_emu::testing::OrderTestName);

}  // namespace
}  // namespace tandem::cuda
