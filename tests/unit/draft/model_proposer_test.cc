// ModelProposer on the default model: greedy proposals equal the model's own
// greedy continuation, rollback continues correctly, seeded sampling repeats,
// bad positions are rejected and Release returns every block.
#include "draft/model_proposer.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/draft/greedy_reference.h"

namespace tandem::draft {
namespace {

std::string ModelPath() {
  const char* env = std::getenv("TANDEM_MODEL");
  if (env != nullptr && env[0] != '\0') return env;
  return std::string(TANDEM_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::unique_ptr<model::Model> LoadModel() {
  model::ModelOptions options;
  options.precision = model::Precision::kReference;
  options.num_threads = 2;
  auto model = model::Model::Load(ModelPath(), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

constexpr int32_t kBlocks = 64;
constexpr int32_t kBlockSize = 16;

std::vector<int32_t> Ids(const std::vector<DraftToken>& tokens) {
  std::vector<int32_t> ids;
  for (const DraftToken& t : tokens) ids.push_back(t.token);
  return ids;
}

class ModelProposerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    reference_ = LoadModel().release();
    ModelProposerConfig config;
    config.num_blocks = kBlocks;
    config.block_size = kBlockSize;
    auto proposer = ModelProposer::Create(LoadModel(), config);
    ASSERT_TRUE(proposer.ok()) << proposer.status();
    proposer_ = proposer->release();
  }
  static void TearDownTestSuite() {
    delete proposer_;
    delete reference_;
  }

  static inline model::Model* reference_ = nullptr;
  static inline ModelProposer* proposer_ = nullptr;
  const std::vector<int32_t> prompt_ = {1, 9690, 198, 2683, 359, 253, 5356, 16, 2, 198,
                                        1, 4093, 198, 504, 3485, 282, 4649, 314};
  sampling::SamplingParams greedy_ = [] {
    sampling::SamplingParams p;
    p.temperature = 0;
    return p;
  }();
};

TEST_F(ModelProposerTest, GreedyMatchesPlainGreedyAndRollbackContinues) {
  const std::vector<int32_t> expected =
      testing::GreedyContinuation(*reference_, prompt_, 8, kBlocks, kBlockSize);
  const SeqId seq(1);
  auto drafted = proposer_->Propose(seq, prompt_, 0, 4, &greedy_, 0, 0);
  ASSERT_TRUE(drafted.ok()) << drafted.status();
  EXPECT_EQ(Ids(*drafted), std::vector<int32_t>(expected.begin(), expected.begin() + 4));
  for (const DraftToken& t : *drafted) {
    EXPECT_EQ(t.prob, 1.0f);
    EXPECT_TRUE(t.support_tokens.empty());
  }
  const int32_t n = static_cast<int32_t>(prompt_.size());
  EXPECT_EQ(proposer_->Length(seq), n + 3);

  // The target accepted 2 drafts and corrected the 3rd to expected[2] (the
  // same model agrees with itself): roll back and continue.
  ASSERT_TRUE(proposer_->Release(seq, n + 2).ok());
  auto next = proposer_->Propose(seq, std::vector<int32_t>{expected[2]}, n + 2, 4, nullptr, 0, 0);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Ids(*next), std::vector<int32_t>(expected.begin() + 3, expected.begin() + 7));
  EXPECT_EQ(proposer_->Length(seq), n + 3 + 3);
  ASSERT_TRUE(proposer_->Release(seq, 0).ok());
}

TEST_F(ModelProposerTest, SeededSamplingRepeatsAndReportsQ) {
  sampling::SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  std::vector<std::vector<DraftToken>> runs;
  for (int64_t id : {2, 3}) {
    auto drafted = proposer_->Propose(SeqId(id), prompt_, 0, 4, &p, 1234, 0);
    ASSERT_TRUE(drafted.ok()) << drafted.status();
    runs.push_back(*drafted);
  }
  ASSERT_EQ(runs[0].size(), 4u);
  EXPECT_EQ(Ids(runs[0]), Ids(runs[1]));
  for (const DraftToken& t : runs[0]) {
    EXPECT_GT(t.prob, 0.0f);
    EXPECT_LE(t.prob, 1.0f);
    ASSERT_FALSE(t.support_tokens.empty());
    EXPECT_LE(t.support_tokens.size(), 40u);
    double sum = 0;
    for (float q : t.support_probs) sum += q;
    EXPECT_NEAR(sum, 1.0, 1e-4);
  }
  ASSERT_TRUE(proposer_->Release(SeqId(2), 0).ok());
  ASSERT_TRUE(proposer_->Release(SeqId(3), 0).ok());
}

TEST_F(ModelProposerTest, BadStartPosIsInvalidArgumentAndChangesNothing) {
  auto bad = proposer_->Propose(SeqId(4), prompt_, 3, 2, &greedy_, 0, 0);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("start_pos 3"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("0 tokens"), std::string::npos) << bad.status();
  EXPECT_EQ(proposer_->num_sequences(), 0);
  auto no_params = proposer_->Propose(SeqId(4), prompt_, 0, 2, nullptr, 0, 0);
  EXPECT_EQ(no_params.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(proposer_->Release(SeqId(4), 5).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelProposerTest, ReleaseFreesEveryBlockAndFullCacheIsResourceExhausted) {
  const kv::KvStats before = proposer_->kv_stats();
  EXPECT_EQ(before.num_blocks_free, kBlocks);
  for (int64_t id = 10; id < 13; ++id) {
    ASSERT_TRUE(proposer_->Propose(SeqId(id), prompt_, 0, 3, &greedy_, 0, 0).ok());
  }
  EXPECT_LT(proposer_->kv_stats().num_blocks_free, kBlocks);
  ASSERT_TRUE(proposer_->Release(SeqId(10), 5).ok());
  for (int64_t id = 10; id < 13; ++id) ASSERT_TRUE(proposer_->Release(SeqId(id), 0).ok());
  EXPECT_EQ(proposer_->kv_stats().num_blocks_free, before.num_blocks_free);
  EXPECT_EQ(proposer_->kv_stats().num_blocks_used, 0);
  EXPECT_EQ(proposer_->num_sequences(), 0);

  std::vector<int32_t> long_prompt(static_cast<size_t>(kBlocks * kBlockSize + 1), 198);
  auto full = proposer_->Propose(SeqId(20), long_prompt, 0, 1, &greedy_, 0, 0);
  ASSERT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_NE(full.status().message().find("blocks"), std::string::npos);
  EXPECT_EQ(proposer_->num_sequences(), 0);
  EXPECT_EQ(proposer_->kv_stats().num_blocks_free, kBlocks);
}

}  // namespace
}  // namespace tandem::draft
