// Layer-skip (ModelOptions::num_layers): a Model of the default model's first
// L layers. L = every layer (or 0) is the full model bit for bit; fewer
// layers change the logits, need a KvStorage of only L layers, and L outside
// [1, block_count] is InvalidArgument naming L and the limit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::model {
namespace {

constexpr int32_t kBlocks = 4;
constexpr int32_t kBlockSize = 16;

std::unique_ptr<Model> Load(int32_t num_layers) {
  ModelOptions options;
  options.num_threads = 2;
  options.num_layers = num_layers;
  auto model = Model::Load(testing::DefaultModelPath(), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

std::unique_ptr<kv::KvStorage> Storage(const Model& model, int32_t num_layers) {
  const ModelConfig& c = model.config();
  kv::KvStorageConfig sc{num_layers, kBlocks, kBlockSize, model.num_local_kv_heads(), c.head_dim,
                         model.kv_dtype()};
  auto storage = kv::KvStorage::Create(sc);
  EXPECT_TRUE(storage.ok()) << storage.status();
  return storage.ok() ? std::move(*storage) : nullptr;
}

const std::vector<int32_t> kPrompt = {1, 9690, 198, 2683, 359, 253, 5356, 16, 2, 198};

// Last-position logits of kPrompt with a KvStorage of `storage_layers` layers.
absl::StatusOr<std::vector<float>> PromptLogits(Model& model, int32_t storage_layers) {
  std::unique_ptr<kv::KvStorage> storage = Storage(model, storage_layers);
  std::vector<BlockId> table;
  for (int32_t b = 0; b < kBlocks; ++b) table.push_back(BlockId(b));
  ForwardSequence fs;
  fs.tokens = kPrompt;
  fs.block_table = table;
  std::vector<float> logits(static_cast<size_t>(model.config().vocab_size));
  absl::Status ran =
      model.Forward(std::span<const ForwardSequence>(&fs, 1), *storage, logits.data());
  if (!ran.ok()) return ran;
  return logits;
}

TEST(ModelLayersTest, EveryLayerIsTheFullModel) {
  std::unique_ptr<Model> full = Load(0);
  ASSERT_NE(full, nullptr);
  const int32_t layers = full->config().num_layers;
  EXPECT_EQ(full->file_num_layers(), layers);
  std::unique_ptr<Model> all = Load(layers);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->config().num_layers, layers);
  auto a = PromptLogits(*full, layers);
  auto b = PromptLogits(*all, layers);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(ModelLayersTest, FewerLayersNeedOnlyTheirKvAndChangeTheLogits) {
  std::unique_ptr<Model> full = Load(0);
  std::unique_ptr<Model> skip = Load(8);
  ASSERT_NE(full, nullptr);
  ASSERT_NE(skip, nullptr);
  EXPECT_EQ(skip->config().num_layers, 8);
  EXPECT_EQ(skip->file_num_layers(), full->config().num_layers);
  EXPECT_EQ(skip->config().vocab_size, full->config().vocab_size);

  auto skip_logits = PromptLogits(*skip, 8);
  ASSERT_TRUE(skip_logits.ok()) << skip_logits.status();
  auto full_logits = PromptLogits(*full, full->config().num_layers);
  ASSERT_TRUE(full_logits.ok());
  double diff = 0;
  for (size_t i = 0; i < skip_logits->size(); ++i) {
    EXPECT_TRUE(std::isfinite((*skip_logits)[i])) << i;
    diff = std::max(diff, static_cast<double>(std::abs((*skip_logits)[i] - (*full_logits)[i])));
  }
  EXPECT_GT(diff, 1e-3) << "8 of the layers should not give the full model's logits";

  auto too_few = PromptLogits(*skip, 7);
  ASSERT_EQ(too_few.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_few.status().message().find("holds 7 layers"), std::string::npos)
      << too_few.status();
  EXPECT_NE(too_few.status().message().find("runs 8"), std::string::npos) << too_few.status();
}

TEST(ModelLayersTest, LayersOutOfRangeNameTheValueAndLimit) {
  for (int32_t bad : {-1, 31, 1000}) {
    ModelOptions options;
    options.num_layers = bad;
    auto model = Model::Load(testing::DefaultModelPath(), options);
    ASSERT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    const std::string message(model.status().message());
    EXPECT_NE(message.find("num_layers " + std::to_string(bad)), std::string::npos) << message;
    EXPECT_NE(message.find("[1, 30]"), std::string::npos) << message;
  }
  std::unique_ptr<Model> one = Load(1);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->config().num_layers, 1);
  EXPECT_TRUE(PromptLogits(*one, 1).ok());
}

}  // namespace
}  // namespace tandem::model
