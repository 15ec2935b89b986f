// MakeProposer on the default model (30 layers): layer-skip with every layer
// drafts the full model's greedy continuation (and rolls back like it), with
// fewer layers it drafts the truncated model's own greedy tokens from a KV
// cache of only those layers; ngram takes its vocabulary from the GGUF or
// --vocab-size; bad specs name the value and the limit.
#include "draft/proposer_factory.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "draft/model_proposer.h"
#include "gtest/gtest.h"
#include "tests/unit/draft/greedy_reference.h"

namespace tandem::draft {
namespace {

std::string ModelPath() {
  const char* env = std::getenv("TANDEM_MODEL");
  if (env != nullptr && env[0] != '\0') return env;
  return std::string(TANDEM_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

constexpr int32_t kBlocks = 64;
constexpr int32_t kBlockSize = 16;
const std::vector<int32_t> kPrompt = {1, 9690, 198, 2683, 359, 253, 5356, 16, 2, 198,
                                      1, 4093, 198, 504, 3485, 282, 4649, 314};

ProposerOptions Options(const std::string& spec_text) {
  ProposerOptions options;
  auto spec = ParseSpeculativeSpec(spec_text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (spec.ok()) options.spec = *spec;
  options.target_model_path = ModelPath();
  options.model_options.num_threads = 2;
  options.block_size = kBlockSize;
  options.kv_blocks = kBlocks;
  return options;
}

std::unique_ptr<model::Model> LoadModel(int32_t num_layers) {
  model::ModelOptions options;
  options.num_threads = 2;
  options.num_layers = num_layers;
  auto model = model::Model::Load(ModelPath(), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

std::vector<int32_t> Ids(const std::vector<DraftToken>& tokens) {
  std::vector<int32_t> ids;
  for (const DraftToken& t : tokens) ids.push_back(t.token);
  return ids;
}

sampling::SamplingParams Greedy() {
  sampling::SamplingParams p;
  p.temperature = 0;
  return p;
}

TEST(ProposerFactoryTest, LayerSkipWithEveryLayerDraftsTheFullModelsGreedyTokens) {
  std::unique_ptr<model::Model> full = LoadModel(0);
  ASSERT_NE(full, nullptr);
  const int32_t layers = full->config().num_layers;
  const std::vector<int32_t> expected =
      testing::GreedyContinuation(*full, kPrompt, 8, kBlocks, kBlockSize);

  auto proposer = MakeProposer(Options("layer-skip:" + std::to_string(layers)));
  ASSERT_TRUE(proposer.ok()) << proposer.status();
  Proposer& p = **proposer;
  EXPECT_EQ(p.info().kind, ProposerKind::kLayerSkip);
  EXPECT_EQ(p.info().name, "layer-skip:" + std::to_string(layers) + ":" + full->config().name);
  EXPECT_EQ(p.info().vocab_size, full->config().vocab_size);
  EXPECT_EQ(p.info().max_sequences, kBlocks);

  const sampling::SamplingParams greedy = Greedy();
  const SeqId seq(1);
  auto drafted = p.Propose(seq, kPrompt, 0, 4, &greedy, 0, 0);
  ASSERT_TRUE(drafted.ok()) << drafted.status();
  EXPECT_EQ(Ids(*drafted), std::vector<int32_t>(expected.begin(), expected.begin() + 4));
  const int32_t n = static_cast<int32_t>(kPrompt.size());
  EXPECT_EQ(p.Length(seq), n + 3);
  // Accept 2, correct the 3rd (to the same token: the full model agrees
  // with itself), continue.
  ASSERT_TRUE(p.Release(seq, n + 2).ok());
  auto next = p.Propose(seq, std::vector<int32_t>{expected[2]}, n + 2, 4, nullptr, 0, 0);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Ids(*next), std::vector<int32_t>(expected.begin() + 3, expected.begin() + 7));
  ASSERT_TRUE(p.Release(seq, 0).ok());
  EXPECT_EQ(p.num_sequences(), 0);
}

TEST(ProposerFactoryTest, LayerSkipWithFewerLayersDraftsTheTruncatedModelsTokens) {
  std::unique_ptr<model::Model> truncated = LoadModel(8);
  ASSERT_NE(truncated, nullptr);
  const std::vector<int32_t> expected =
      testing::GreedyContinuation(*truncated, kPrompt, 4, kBlocks, kBlockSize);

  auto proposer = MakeProposer(Options("layer-skip:8"));
  ASSERT_TRUE(proposer.ok()) << proposer.status();
  Proposer& p = **proposer;
  const sampling::SamplingParams greedy = Greedy();
  auto drafted = p.Propose(SeqId(1), kPrompt, 0, 4, &greedy, 0, 0);
  ASSERT_TRUE(drafted.ok()) << drafted.status();
  ASSERT_EQ(drafted->size(), 4u);
  for (const DraftToken& t : *drafted) {
    EXPECT_GE(t.token, 0);
    EXPECT_LT(t.token, p.info().vocab_size);
    EXPECT_EQ(t.prob, 1.0f);
  }
  EXPECT_EQ(Ids(*drafted), expected);

  // Sampled drafts carry a distribution that sums to 1.
  sampling::SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.top_k = 20;
  auto q = p.Propose(SeqId(2), kPrompt, 0, 3, &sampled, 99, 0);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->size(), 3u);
  for (const DraftToken& t : *q) {
    double sum = 0;
    for (float prob : t.support_probs) sum += prob;
    EXPECT_NEAR(sum, 1.0, 1e-4);
    EXPECT_GT(t.prob, 0.0f);
  }

  // The KV cache holds 8 layers: a byte budget buys 30/8 as many blocks.
  ProposerOptions by_bytes = Options("layer-skip:8");
  by_bytes.kv_blocks = 0;
  by_bytes.kv_cache_bytes = 8 << 20;
  auto skip = MakeProposer(by_bytes);
  ASSERT_TRUE(skip.ok()) << skip.status();
  ProposerOptions full_bytes = Options("model");
  full_bytes.kv_blocks = 0;
  full_bytes.kv_cache_bytes = 8 << 20;
  auto whole = MakeProposer(full_bytes);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ((*whole)->info().kind, ProposerKind::kModel);
  EXPECT_EQ((*whole)->info().name, truncated->config().name);
  EXPECT_GT((*skip)->info().max_sequences, (*whole)->info().max_sequences);
  EXPECT_GE((*skip)->info().max_sequences, (*whole)->info().max_sequences * 30 / 8);
}

TEST(ProposerFactoryTest, LayerSkipBeyondTheTargetNamesLAndTheLimit) {
  auto bad = MakeProposer(Options("layer-skip:31"));
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("31"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("[1, 30]"), std::string::npos) << bad.status();

  ProposerOptions no_path = Options("layer-skip:4");
  no_path.target_model_path.clear();
  EXPECT_EQ(MakeProposer(no_path).status().code(), absl::StatusCode::kInvalidArgument);
  ProposerOptions missing = Options("model:/nonexistent/draft.gguf");
  auto not_found = MakeProposer(missing);
  ASSERT_FALSE(not_found.ok());
  EXPECT_NE(not_found.status().message().find("/nonexistent/draft.gguf"), std::string::npos)
      << not_found.status();
}

TEST(ProposerFactoryTest, NgramTakesItsVocabularyFromTheModelOrTheOption) {
  auto from_model = MakeProposer(Options("ngram"));
  ASSERT_TRUE(from_model.ok()) << from_model.status();
  EXPECT_EQ((*from_model)->info().kind, ProposerKind::kNgram);
  EXPECT_EQ((*from_model)->info().name, "ngram");
  EXPECT_EQ((*from_model)->info().vocab_size, 49152);
  EXPECT_EQ((*from_model)->info().context_length, 8192);

  ProposerOptions bare = Options("ngram");
  bare.target_model_path.clear();
  auto missing = MakeProposer(bare);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("vocab_size"), std::string::npos);
  bare.vocab_size = 1000;
  bare.ngram_min_n = 2;
  bare.ngram_max_n = 3;
  auto sized = MakeProposer(bare);
  ASSERT_TRUE(sized.ok()) << sized.status();
  EXPECT_EQ((*sized)->info().vocab_size, 1000);
  EXPECT_EQ((*sized)->info().context_length, kDefaultNgramContextLength);
  auto drafted = (*sized)->Propose(SeqId(1), std::vector<int32_t>{5, 6, 7, 5, 6}, 0, 2, nullptr,
                                   0, 0);
  ASSERT_TRUE(drafted.ok());
  EXPECT_EQ(Ids(*drafted), (std::vector<int32_t>{7, 5}));

  ProposerOptions disagree = Options("ngram");
  disagree.vocab_size = 1000;
  auto mismatch = MakeProposer(disagree);
  ASSERT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("49152"), std::string::npos) << mismatch.status();
  ProposerOptions bad_n = bare;
  bad_n.ngram_max_n = 1;
  EXPECT_EQ(MakeProposer(bad_n).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::draft
