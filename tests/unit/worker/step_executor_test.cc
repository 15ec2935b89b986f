// StepExecutor verification steps on the real default model: decoding with
// drafts (all correct, or wrong at some position) emits exactly the tokens
// of plain step-by-step decoding, also with penalties that depend on the
// history, next to a plain sequence in the same batch. Rejected drafts leave
// their K/V in the blocks; the next step overwrites those positions and its
// results stay right. Bad draft fields are rejected without changing state.
#include "worker/step_executor.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::worker {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kBlockSize = 16;
constexpr int32_t kBlocksPerSequence = 8;  // 128 positions
constexpr int32_t kNumBlocks = 4 * kBlocksPerSequence;
constexpr size_t kNumTokens = 28;  // tokens generated per sequence

// One sequence as the coordinator sees it.
struct Sequence {
  SeqId id;
  std::vector<int32_t> prompt;
  sampling::SamplingParams params;
  std::vector<BlockId> table;
  std::vector<int32_t> emitted;
  bool sent = false;

  // Position of the next token to compute: the last emitted one's.
  int32_t next_pos() const {
    return static_cast<int32_t>(prompt.size() + emitted.size()) - 1;
  }
};

Sequence MakeSequence(int64_t id, std::vector<int32_t> prompt, int32_t first_block,
                      const sampling::SamplingParams& params) {
  Sequence s;
  s.id = SeqId(id);
  s.prompt = std::move(prompt);
  s.params = params;
  for (int32_t b = 0; b < kBlocksPerSequence; ++b) s.table.push_back(BlockId(first_block + b));
  return s;
}

// Adds `s`'s step to `plan`: its prompt the first time, then the last emitted
// token followed by `drafts` (one-hot q).
void AddStep(Sequence& s, const std::vector<int32_t>& drafts, StepPlan* plan) {
  SequenceStep step;
  step.id = s.id;
  if (!s.sent) {
    plan->new_sequences.push_back(NewSequence{s.id, s.prompt, {}, s.params, /*seed=*/7, 0});
    step.tokens = s.prompt;
    step.start_pos = 0;
    s.sent = true;
  } else {
    step.tokens = {s.emitted.back()};
    step.start_pos = s.next_pos();
  }
  step.tokens.insert(step.tokens.end(), drafts.begin(), drafts.end());
  step.block_table = s.table;
  step.sample = true;
  step.num_draft_tokens = static_cast<int32_t>(drafts.size());
  step.draft_probs.resize(drafts.size());  // one-hot q (prob 1, empty support)
  plan->sequences.push_back(std::move(step));
}

// Appends what the step emitted for `s` and returns how many drafts it
// accepted.
size_t Absorb(Sequence& s, const SequenceResult& r) {
  EXPECT_EQ(r.id, s.id);
  for (const sampling::SampleResult& a : r.accepted_drafts) s.emitted.push_back(a.token);
  s.emitted.push_back(r.sample.token);
  return r.accepted_drafts.size();
}

class StepExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model::ModelOptions options;
    options.num_threads = 2;
    auto m = model::Model::Load(testing::DefaultModelPath(), options);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = m->release();
    std::vector<nlohmann::json> prompts =
        testing::ReadReferenceJsonl("model/expected_greedy.jsonl");
    ASSERT_GE(prompts.size(), 4u);
    for (size_t i : {0, 3}) {
      prompts_.push_back(prompts[i]["prompt_ids"].get<std::vector<int32_t>>());
    }
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

  // Greedy-with-penalties params: each token depends on the whole history.
  static sampling::SamplingParams Params() {
    sampling::SamplingParams p;
    p.temperature = 0.0f;
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.2f;
    p.logprobs = 2;
    return p;
  }

  // Plain decoding, one token per step, in a fresh executor.
  static std::vector<int32_t> Baseline(const std::vector<int32_t>& prompt,
                                       const sampling::SamplingParams& params) {
    std::unique_ptr<StepExecutor> executor = NewExecutor();
    Sequence s = MakeSequence(1, prompt, 0, params);
    while (s.emitted.size() < kNumTokens) {
      StepPlan plan;
      plan.step_id = static_cast<int64_t>(s.emitted.size());
      AddStep(s, {}, &plan);
      absl::StatusOr<StepResult> result = executor->Execute(plan);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) return {};
      EXPECT_TRUE(result->results[0].accepted_drafts.empty());
      Absorb(s, result->results[0]);
    }
    return s.emitted;
  }

  static model::Model* model_;
  static std::vector<std::vector<int32_t>> prompts_;
};

model::Model* StepExecutorTest::model_ = nullptr;
std::vector<std::vector<int32_t>> StepExecutorTest::prompts_;

// Sequence A verifies 3 drafts per step: the true continuation, except that
// at step k the draft at index k % 4 is replaced by a wrong token (index 3:
// none wrong). Sequence B decodes plainly in the same batch. Both must emit
// exactly their baselines; A's accepted count must be the correct prefix.
// Rejected drafts (and the drafts after them) leave K/V at positions the
// next step rewrites.
TEST_F(StepExecutorTest, VerifiedDecodingEqualsPlainDecoding) {
  const std::vector<int32_t> want_a = Baseline(prompts_[0], Params());
  const std::vector<int32_t> want_b = Baseline(prompts_[1], Params());
  ASSERT_EQ(want_a.size(), kNumTokens);
  ASSERT_EQ(want_b.size(), kNumTokens);

  std::unique_ptr<StepExecutor> executor = NewExecutor();
  Sequence a = MakeSequence(1, prompts_[0], 0, Params());
  Sequence b = MakeSequence(2, prompts_[1], kBlocksPerSequence, Params());
  const int32_t vocab = model_->config().vocab_size;
  int num_full = 0, num_partial = 0;
  for (int step = 0; a.emitted.size() < kNumTokens || b.emitted.size() < kNumTokens; ++step) {
    StepPlan plan;
    plan.step_id = step;
    std::vector<int32_t> drafts;
    size_t expected_accepted = 0;
    if (a.sent) {
      for (size_t i = a.emitted.size(); i < std::min(a.emitted.size() + 3, kNumTokens); ++i) {
        drafts.push_back(want_a[i]);
      }
      expected_accepted = drafts.size();
      const size_t wrong = static_cast<size_t>(step % 4);
      if (wrong < drafts.size()) {
        drafts[wrong] = (drafts[wrong] + 1) % vocab;
        expected_accepted = wrong;
      }
    }
    if (a.emitted.size() < kNumTokens) AddStep(a, drafts, &plan);
    if (b.emitted.size() < kNumTokens) AddStep(b, {}, &plan);
    absl::StatusOr<StepResult> result = executor->Execute(plan);
    ASSERT_TRUE(result.ok()) << "step " << step << ": " << result.status();
    ASSERT_EQ(result->results.size(), plan.sequences.size());
    for (const SequenceResult& r : result->results) {
      if (r.id == a.id) {
        const size_t accepted = Absorb(a, r);
        EXPECT_EQ(accepted, expected_accepted) << "step " << step;
        if (!drafts.empty()) (accepted == drafts.size() ? num_full : num_partial)++;
        for (const sampling::SampleResult& d : r.accepted_drafts) {
          EXPECT_EQ(d.top_logprobs.size(), 2u);
          EXPECT_LT(d.logprob, 0.0f);
        }
      } else {
        Absorb(b, r);
      }
    }
    int64_t computed = 0;
    for (const SequenceStep& st : plan.sequences) {
      computed += static_cast<int64_t>(st.tokens.size());
    }
    EXPECT_EQ(result->timings.num_tokens, computed);
  }
  a.emitted.resize(kNumTokens);  // the last step may run past
  EXPECT_EQ(a.emitted, want_a);
  EXPECT_EQ(b.emitted, want_b);
  EXPECT_GT(num_full, 1);
  EXPECT_GT(num_partial, 3);
}

// Logprobs of accepted drafts and of the token after them are those plain
// decoding reports at the same positions.
TEST_F(StepExecutorTest, VerifiedLogprobsMatchPlainDecoding) {
  std::unique_ptr<StepExecutor> plain = NewExecutor();
  std::unique_ptr<StepExecutor> verified = NewExecutor();
  Sequence p = MakeSequence(1, prompts_[0], 0, Params());
  Sequence v = MakeSequence(1, prompts_[0], 0, Params());
  std::vector<sampling::SampleResult> plain_results;
  for (int step = 0; step < 5; ++step) {
    StepPlan plan;
    plan.step_id = step;
    AddStep(p, {}, &plan);
    absl::StatusOr<StepResult> r = plain->Execute(plan);
    ASSERT_TRUE(r.ok()) << r.status();
    Absorb(p, r->results[0]);
    plain_results.push_back(r->results[0].sample);
  }
  StepPlan prefill;
  AddStep(v, {}, &prefill);
  absl::StatusOr<StepResult> r = verified->Execute(prefill);
  ASSERT_TRUE(r.ok()) << r.status();
  Absorb(v, r->results[0]);
  StepPlan verify;
  verify.step_id = 1;
  AddStep(v, {p.emitted[1], p.emitted[2], p.emitted[3]}, &verify);
  r = verified->Execute(verify);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->results[0].accepted_drafts.size(), 3u);
  std::vector<sampling::SampleResult> got = r->results[0].accepted_drafts;
  got.push_back(r->results[0].sample);
  for (size_t i = 0; i < got.size(); ++i) {
    const sampling::SampleResult& want = plain_results[i + 1];
    EXPECT_EQ(got[i].token, want.token) << "position " << i;
    // Same logits up to the forward's rounding (one multi-token forward vs
    // one token per forward).
    EXPECT_NEAR(got[i].logprob, want.logprob, 1e-3) << "position " << i;
    ASSERT_EQ(got[i].top_logprobs.size(), want.top_logprobs.size());
    for (size_t j = 0; j < want.top_logprobs.size(); ++j) {
      EXPECT_EQ(got[i].top_logprobs[j].token, want.top_logprobs[j].token);
      EXPECT_NEAR(got[i].top_logprobs[j].logprob, want.top_logprobs[j].logprob, 1e-3);
    }
  }
}

// A sampled target (temperature, top-p, penalties) verifying one-hot drafts
// (the greedy continuation): each step emits its accepted drafts plus one
// token, the history grows by exactly that, and the same seed reproduces
// every token.
TEST_F(StepExecutorTest, SampledVerificationIsReproducible) {
  const std::vector<int32_t> greedy = Baseline(prompts_[1], Params());
  sampling::SamplingParams params;
  params.temperature = 0.7f;
  params.top_p = 0.9f;
  params.repetition_penalty = 1.1f;
  auto run = [&](int* num_accepted) {
    std::unique_ptr<StepExecutor> executor = NewExecutor();
    Sequence s = MakeSequence(3, prompts_[1], 0, params);
    for (int step = 0; s.emitted.size() < kNumTokens; ++step) {
      StepPlan plan;
      plan.step_id = step;
      std::vector<int32_t> drafts;
      if (s.sent) {
        for (size_t i = s.emitted.size(); i < std::min(s.emitted.size() + 4, kNumTokens); ++i) {
          drafts.push_back(greedy[i]);
        }
      }
      AddStep(s, drafts, &plan);
      absl::StatusOr<StepResult> r = executor->Execute(plan);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      const size_t before = s.emitted.size();
      const size_t accepted = Absorb(s, r->results[0]);
      EXPECT_LE(accepted, drafts.size());
      EXPECT_EQ(s.emitted.size(), before + accepted + 1);
      for (size_t i = 0; i < accepted; ++i) EXPECT_EQ(s.emitted[before + i], drafts[i]);
      *num_accepted += static_cast<int>(accepted);
    }
    return s.emitted;
  };
  int accepted_a = 0, accepted_b = 0;
  const std::vector<int32_t> a = run(&accepted_a);
  const std::vector<int32_t> b = run(&accepted_b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(accepted_a, accepted_b);
  EXPECT_GT(accepted_a, 0);
}

// Bad draft fields fail the step with InvalidArgument naming the sequence;
// the sequence's history is unchanged, so a correct step afterwards emits
// the plain-decoding token.
TEST_F(StepExecutorTest, RejectsBadDraftFieldsWithoutChangingState) {
  const std::vector<int32_t> want = Baseline(prompts_[0], Params());
  std::unique_ptr<StepExecutor> executor = NewExecutor();
  Sequence s = MakeSequence(4, prompts_[0], 0, Params());
  StepPlan prefill;
  AddStep(s, {}, &prefill);
  absl::StatusOr<StepResult> r = executor->Execute(prefill);
  ASSERT_TRUE(r.ok()) << r.status();
  Absorb(s, r->results[0]);

  auto bad = [&](auto mutate, const std::string& part) {
    StepPlan plan;
    plan.step_id = 1;
    AddStep(s, {want[1], want[2]}, &plan);
    mutate(plan.sequences[0]);
    absl::StatusOr<StepResult> got = executor->Execute(plan);
    ASSERT_FALSE(got.ok()) << part;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr("sequence 4"));
    EXPECT_THAT(got.status().message(), HasSubstr(part));
  };
  bad([](SequenceStep& st) { st.num_draft_tokens = 3; }, "num_draft_tokens 3 is out of range");
  bad([](SequenceStep& st) { st.sample = false; }, "requires sample = true");
  bad([](SequenceStep& st) { st.draft_probs.pop_back(); }, "1 draft_probs for num_draft_tokens 2");
  bad([](SequenceStep& st) { st.draft_probs[1].prob = 2.0f; }, "draft_probs[1]");

  StepPlan good;
  good.step_id = 2;
  AddStep(s, {want[1], want[2]}, &good);
  r = executor->Execute(good);
  ASSERT_TRUE(r.ok()) << r.status();
  Absorb(s, r->results[0]);
  ASSERT_EQ(s.emitted.size(), 4u);
  EXPECT_EQ(s.emitted, std::vector<int32_t>(want.begin(), want.begin() + 4));
}

// Beam sequences keep their own protocol: drafts on them are rejected.
TEST_F(StepExecutorTest, BeamRowsWithDraftsReturnTheCandidatesOfEveryPosition) {
  // Speculative beam search: one step over the token and two drafts must
  // give, at each position, the candidates three single steps give
  // (the repetition penalty makes each row depend on the drafts before it).
  sampling::SamplingParams params = Params();
  params.beam_candidates = 6;
  params.repetition_penalty = 1.3f;
  const std::vector<int32_t> drafts = {prompts_[0][1], prompts_[0][2]};

  std::unique_ptr<StepExecutor> one = NewExecutor();
  Sequence s = MakeSequence(9, prompts_[0], 0, params);
  StepPlan plan;
  AddStep(s, drafts, &plan);
  absl::StatusOr<StepResult> spec = one->Execute(plan);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->results.size(), 1u);
  const SequenceResult& got = spec->results[0];
  ASSERT_EQ(got.draft_beam_candidates.size(), 2u);

  std::unique_ptr<StepExecutor> stepwise = NewExecutor();
  Sequence t = MakeSequence(9, prompts_[0], 0, params);
  std::vector<std::vector<sampling::BeamToken>> want;
  for (int k = 0; k < 3; ++k) {
    StepPlan p;
    AddStep(t, {}, &p);
    absl::StatusOr<StepResult> r = stepwise->Execute(p);
    ASSERT_TRUE(r.ok()) << r.status();
    want.push_back(r->results[0].sample.beam_candidates);
    if (k < 2) t.emitted.push_back(drafts[static_cast<size_t>(k)]);
  }
  auto same = [](const std::vector<sampling::BeamToken>& a,
                 const std::vector<sampling::BeamToken>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].token != b[i].token || std::abs(a[i].score - b[i].score) > 1e-4f) return false;
    }
    return true;
  };
  EXPECT_TRUE(same(got.sample.beam_candidates, want[0]));
  EXPECT_TRUE(same(got.draft_beam_candidates[0], want[1]));
  EXPECT_TRUE(same(got.draft_beam_candidates[1], want[2]));
}

}  // namespace
}  // namespace tandem::worker
