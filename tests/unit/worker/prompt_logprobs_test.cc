// StepExecutor prompt logprobs on the real default model: a sequence whose
// params ask for them gets one entry per prompt token after the first,
// whether its prompt comes in one step or in chunks (the same numbers); each
// equals what sampling reports for that token when the prompt stops just
// before it; sequences that do not ask, and decode steps, get none.
#include <cmath>
#include <memory>
#include <vector>

#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model/model_test_util.h"
#include "worker/step_executor.h"

namespace tandem::worker {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 32;
constexpr int32_t kTop = 3;

class PromptLogprobsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model::ModelOptions options;
    options.num_threads = 2;
    options.precision = model::Precision::kReference;
    auto m = model::Model::Load(testing::DefaultModelPath(), options);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = m->release();
    prompt_ = testing::ReadReferenceJsonl("model/expected_greedy.jsonl")[3]["prompt_ids"]
                  .get<std::vector<int32_t>>();
    ASSERT_GE(prompt_.size(), 12u);
  }
  static void TearDownTestSuite() { delete model_; }

  static std::unique_ptr<StepExecutor> NewExecutor() {
    StepExecutorConfig config;
    config.num_blocks = kNumBlocks;
    config.block_size = kBlockSize;
    auto executor = StepExecutor::Create(model_, config);
    EXPECT_TRUE(executor.ok()) << executor.status();
    return executor.ok() ? std::move(*executor) : nullptr;
  }

  static sampling::SamplingParams Params(int32_t prompt_logprobs) {
    sampling::SamplingParams p;
    p.temperature = 0.0f;
    p.logprobs = 20;
    p.prompt_logprobs = prompt_logprobs;
    return p;
  }

  // Runs `prompt` for sequence 1 in steps of the given sizes (the last one
  // samples); returns every step's result.
  static std::vector<StepResult> RunPrompt(const std::vector<int32_t>& prompt,
                                           const std::vector<size_t>& chunks,
                                           const sampling::SamplingParams& params) {
    std::unique_ptr<StepExecutor> executor = NewExecutor();
    std::vector<BlockId> table;
    for (int32_t b = 0; b < 4; ++b) table.push_back(BlockId(b));
    std::vector<StepResult> results;
    size_t done = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      StepPlan plan;
      plan.step_id = static_cast<int64_t>(c);
      if (c == 0) plan.new_sequences.push_back(NewSequence{SeqId(1), prompt, {}, params, 7, 0});
      SequenceStep s;
      s.id = SeqId(1);
      s.tokens.assign(prompt.begin() + done, prompt.begin() + done + chunks[c]);
      s.start_pos = static_cast<int32_t>(done);
      s.block_table = table;
      s.sample = c + 1 == chunks.size();
      plan.sequences.push_back(std::move(s));
      done += chunks[c];
      absl::StatusOr<StepResult> r = executor->Execute(plan);
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) results.push_back(*std::move(r));
    }
    return results;
  }

  // Every step's prompt logprobs of sequence 1, in position order from 1.
  static std::vector<sampling::SampleResult> Scored(const std::vector<StepResult>& results) {
    std::vector<sampling::SampleResult> out;
    for (const StepResult& r : results) {
      for (const PromptLogprobs& p : r.prompt_logprobs) {
        EXPECT_EQ(p.first_position, static_cast<int32_t>(out.size()) + 1);
        out.insert(out.end(), p.tokens.begin(), p.tokens.end());
      }
    }
    return out;
  }

  static model::Model* model_;
  static std::vector<int32_t> prompt_;
};

model::Model* PromptLogprobsTest::model_ = nullptr;
std::vector<int32_t> PromptLogprobsTest::prompt_;

TEST_F(PromptLogprobsTest, OneEntryPerPromptTokenAfterTheFirst) {
  const std::vector<sampling::SampleResult> scored =
      Scored(RunPrompt(prompt_, {prompt_.size()}, Params(kTop)));
  ASSERT_EQ(scored.size(), prompt_.size() - 1);
  for (size_t i = 0; i < scored.size(); ++i) {
    EXPECT_EQ(scored[i].token, prompt_[i + 1]);
    EXPECT_LE(scored[i].logprob, 0.0f);
    ASSERT_EQ(scored[i].top_logprobs.size(), static_cast<size_t>(kTop));
    EXPECT_GE(scored[i].top_logprobs[0].logprob, scored[i].logprob);
    for (int32_t k = 1; k < kTop; ++k) {
      EXPECT_GE(scored[i].top_logprobs[k - 1].logprob, scored[i].top_logprobs[k].logprob);
    }
  }
}

TEST_F(PromptLogprobsTest, ChunkedPromptsScoreTheSame) {
  const std::vector<sampling::SampleResult> whole =
      Scored(RunPrompt(prompt_, {prompt_.size()}, Params(kTop)));
  const size_t n = prompt_.size();
  const std::vector<sampling::SampleResult> chunked =
      Scored(RunPrompt(prompt_, {5, 1, n - 6}, Params(kTop)));
  ASSERT_EQ(chunked.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(chunked[i].token, whole[i].token);
    EXPECT_NEAR(chunked[i].logprob, whole[i].logprob, 1e-4) << "position " << i + 1;
    EXPECT_EQ(chunked[i].top_logprobs[0].token, whole[i].top_logprobs[0].token);
  }
}

// Position p's entry is the distribution after the first p tokens: sampling
// a prompt cut there reports the same logprobs for its top tokens.
TEST_F(PromptLogprobsTest, EqualsTheSampledDistributionAtEachCut) {
  const std::vector<sampling::SampleResult> scored =
      Scored(RunPrompt(prompt_, {prompt_.size()}, Params(kTop)));
  for (size_t p : {size_t{1}, size_t{4}, prompt_.size() - 1}) {
    const std::vector<int32_t> cut(prompt_.begin(), prompt_.begin() + p);
    const std::vector<StepResult> r = RunPrompt(cut, {cut.size()}, Params(-1));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(r[0].prompt_logprobs.empty());  // not asked for
    const sampling::SampleResult& sampled = r[0].results[0].sample;
    const sampling::SampleResult& at = scored[p - 1];
    EXPECT_EQ(sampled.top_logprobs[0].token, at.top_logprobs[0].token) << "cut " << p;
    EXPECT_NEAR(sampled.top_logprobs[0].logprob, at.top_logprobs[0].logprob, 1e-4);
    for (const sampling::TokenLogprob& t : sampled.top_logprobs) {
      if (t.token == at.token) EXPECT_NEAR(t.logprob, at.logprob, 1e-4) << "cut " << p;
    }
  }
}

}  // namespace
}  // namespace tandem::worker
