// The scheduler without a model: a ScriptedWorkerGroup answers each step
// with the tokens, beam candidates and verifications the test chose, so
// each test pins one scheduling decision — the token budget and chunked
// prefill, admission by free blocks, preemption order, n > 1 fork timing,
// beam retirement and early stopping, draft rollback, cancellation at every
// stage, a failed step — in milliseconds.
#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "coordinator/scheduler/scheduler.h"
#include "gtest/gtest.h"
#include "tests/unit/coordinator/scheduler/scripted_worker_group.h"

namespace tandem::coordinator {
namespace {

using testing::kToyEos;
using testing::NextLetter;
using testing::ScriptedDraftPool;
using testing::ScriptedWorkerGroup;

class Recorder : public RequestObserver {
 public:
  void OnDelta(const CompletionDelta& d) override { deltas[d.id.value()].push_back(d); }
  void OnFinished(const RequestOutput& o) override { outputs[o.id.value()] = o; }
  std::map<int64_t, std::vector<CompletionDelta>> deltas;
  std::map<int64_t, RequestOutput> outputs;
};

// `len` prompt tokens starting at letter `first`, counting up.
std::vector<int32_t> Letters(int32_t first, int32_t len) {
  std::vector<int32_t> tokens = {first};
  while (static_cast<int32_t>(tokens.size()) < len) tokens.push_back(NextLetter(tokens));
  return tokens;
}

GenerateRequest Greedy(int64_t id, std::vector<int32_t> prompt, int32_t max_tokens,
                       int32_t priority = 0) {
  GenerateRequest r;
  r.id = RequestId(id);
  r.prompt_tokens = std::move(prompt);
  r.params.max_tokens = max_tokens;
  r.params.temperature = 0.0f;
  r.priority = priority;
  return r;
}

// What the scripted worker generates after `prompt`: letters counting on.
std::vector<int32_t> Expected(const std::vector<int32_t>& prompt, int32_t n) {
  std::vector<int32_t> all = prompt;
  for (int32_t i = 0; i < n; ++i) all.push_back(NextLetter(all));
  return std::vector<int32_t>(all.begin() + static_cast<int64_t>(prompt.size()), all.end());
}

class SchedulerCoreTest : public ::testing::Test {
 protected:
  void Start(int32_t num_blocks, int32_t block_size, SchedulerConfig config = {}) {
    config.enable_prefix_cache = false;  // each test states its block use exactly
    group_ = std::make_unique<ScriptedWorkerGroup>(num_blocks, block_size);
    scheduler_ = std::make_unique<Scheduler>(config, group_.get(), tokenizer_.get(), &rec_);
  }
  void UseDrafts(int32_t gamma, int32_t max_draft_prefill_tokens = 512) {
    SpeculationConfig config;
    config.num_speculative_tokens = gamma;
    config.max_draft_prefill_tokens = max_draft_prefill_tokens;
    scheduler_->set_draft_pool(&pool_, config);
  }
  void Submit(const GenerateRequest& r) { ASSERT_TRUE(scheduler_->Submit(r).ok()); }
  void StepOk() {
    absl::StatusOr<bool> ran = scheduler_->Step();
    ASSERT_TRUE(ran.ok()) << ran.status();
  }
  // Steps until no request is left, then once more so the worker hears of
  // the last released sequences; checks nothing leaked.
  void RunToEnd() {
    for (int i = 0; i < 1000 && scheduler_->HasWork(); ++i) StepOk();
    ASSERT_FALSE(scheduler_->HasWork());
    StepOk();
    EXPECT_EQ(scheduler_->kv_stats().num_blocks_used, 0) << "KV blocks leaked";
    EXPECT_EQ(group_->num_known_sequences(), 0) << "the worker still holds sequences";
    EXPECT_EQ(pool_.num_held_sequences(), 0) << "the draft still holds sequences";
  }
  const RequestOutput& Output(int64_t id) {
    EXPECT_TRUE(rec_.outputs.contains(id)) << "request " << id << " did not finish";
    return rec_.outputs[id];
  }
  // The id the worker knows the sequence of `prompt` by (its last admission).
  SeqId SeqOf(const std::vector<int32_t>& prompt) const {
    SeqId id;
    for (const worker::StepPlan& plan : group_->plans()) {
      for (const worker::NewSequence& ns : plan.new_sequences) {
        if (ns.prompt_tokens == prompt) id = ns.id;
      }
    }
    return id;
  }
  static const worker::SequenceStep* Find(const worker::StepPlan& plan, SeqId id) {
    for (const worker::SequenceStep& s : plan.sequences) {
      if (s.id == id) return &s;
    }
    return nullptr;
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_ = testing::ToyTokenizer();
  std::unique_ptr<ScriptedWorkerGroup> group_;
  ScriptedDraftPool pool_;
  Recorder rec_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerCoreTest, ChunkedPrefillWithinTheTokenBudget) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 8;
  Start(64, 4, config);
  const std::vector<int32_t> prompt = Letters(1, 20);
  Submit(Greedy(1, prompt, 3));
  for (int i = 0; i < 3; ++i) StepOk();
  const auto& plans = group_->plans();
  ASSERT_EQ(plans.size(), 3u);
  const int32_t starts[] = {0, 8, 16};
  const size_t sizes[] = {8, 8, 4};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(plans[i].sequences.size(), 1u);
    EXPECT_EQ(plans[i].sequences[0].start_pos, starts[i]);
    EXPECT_EQ(plans[i].sequences[0].tokens.size(), sizes[i]);
    EXPECT_EQ(plans[i].sequences[0].sample, i == 2) << "only the last chunk samples";
  }
  // A decoding sequence's token comes before another's prefill chunk.
  const std::vector<int32_t> second = Letters(5, 20);
  Submit(Greedy(2, second, 2));
  StepOk();
  const worker::StepPlan& plan = group_->last_plan();
  ASSERT_EQ(plan.sequences.size(), 2u);
  EXPECT_EQ(plan.sequences[0].tokens.size(), 1u);
  EXPECT_EQ(plan.sequences[1].tokens.size(), 7u) << "the rest of the budget";
  RunToEnd();
  EXPECT_EQ(Output(1).completions[0].token_ids, Expected(prompt, 3));
  EXPECT_EQ(Output(2).completions[0].token_ids, Expected(second, 2));
}

TEST_F(SchedulerCoreTest, AdmitsOnlyWhenBlocksAreFree) {
  Start(3, 4);
  const std::vector<int32_t> a = Letters(1, 8), b = Letters(10, 8);
  Submit(Greedy(1, a, 4));  // grows to 11 computed tokens: 3 blocks
  Submit(Greedy(2, b, 2));
  StepOk();
  ASSERT_EQ(group_->last_plan().sequences.size(), 1u) << "the second prompt needs 2 more blocks";
  for (int i = 0; i < 100 && !rec_.outputs.contains(1); ++i) {
    EXPECT_FALSE(SeqOf(b).value() >= 0) << "admitted before the first request freed its blocks";
    StepOk();
  }
  RunToEnd();
  EXPECT_EQ(Output(1).completions[0].token_ids, Expected(a, 4));
  EXPECT_EQ(Output(2).completions[0].token_ids, Expected(b, 2));
  EXPECT_EQ(scheduler_->stats().num_preemptions, 0);
  // A prompt that can never fit is refused up front.
  absl::Status too_big = scheduler_->Submit(Greedy(3, Letters(1, 13), 1));
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted) << too_big;
  EXPECT_NE(too_big.message().find("13 tokens"), std::string_view::npos) << too_big;
}

TEST_F(SchedulerCoreTest, PreemptsLowestPriorityThenLatest) {
  Start(3, 4);
  const std::vector<int32_t> early = Letters(1, 4), high = Letters(10, 4), late = Letters(20, 4);
  Submit(Greedy(1, early, 3, /*priority=*/0));
  Submit(Greedy(2, high, 3, /*priority=*/5));
  Submit(Greedy(3, late, 3, /*priority=*/0));
  StepOk();  // all three prompts: one block each
  ASSERT_EQ(group_->last_plan().sequences.size(), 3u);
  const SeqId early_id = SeqOf(early), late_id = SeqOf(late);
  StepOk();  // each needs a second block; only one is free
  const worker::StepPlan& plan = group_->last_plan();
  ASSERT_EQ(plan.finished.size(), 2u);
  EXPECT_EQ(plan.finished[0], late_id) << "the latest of the lowest priority goes first";
  EXPECT_EQ(plan.finished[1], early_id);
  ASSERT_EQ(plan.sequences.size(), 1u);
  EXPECT_EQ(plan.sequences[0].id, SeqOf(high));
  EXPECT_EQ(scheduler_->stats().num_preemptions, 2);
  RunToEnd();
  // Recomputed after preemption, the same tokens.
  EXPECT_EQ(Output(1).completions[0].token_ids, Expected(early, 3));
  EXPECT_EQ(Output(2).completions[0].token_ids, Expected(high, 3));
  EXPECT_EQ(Output(3).completions[0].token_ids, Expected(late, 3));
}

TEST_F(SchedulerCoreTest, ForksChildrenOnceThePromptIsComputed) {
  Start(64, 4);
  const std::vector<int32_t> prompt = Letters(1, 8);
  GenerateRequest r = Greedy(1, prompt, 2);
  r.params.n = 3;
  Submit(r);
  StepOk();
  const worker::StepPlan& first = group_->plans()[0];
  ASSERT_EQ(first.new_sequences.size(), 1u) << "only the parent";
  ASSERT_EQ(first.sequences.size(), 1u);
  EXPECT_EQ(first.sequences[0].tokens.size(), 7u) << "the parent stops one short";
  EXPECT_FALSE(first.sequences[0].sample);
  const SeqId parent = first.sequences[0].id;
  StepOk();
  const worker::StepPlan& second = group_->plans()[1];
  ASSERT_EQ(second.new_sequences.size(), 3u) << "the children, announced once";
  EXPECT_EQ(second.finished, std::vector<SeqId>{parent}) << "the parent is released";
  ASSERT_EQ(second.sequences.size(), 3u);
  for (const worker::SequenceStep& s : second.sequences) {
    EXPECT_EQ(s.start_pos, 7);
    EXPECT_EQ(s.tokens, std::vector<int32_t>{prompt.back()});
    EXPECT_TRUE(s.sample);
    EXPECT_EQ(s.block_table[0], second.sequences[0].block_table[0]) << "shared prompt block";
  }
  // The shared, partly filled block is copied before two children write it.
  EXPECT_EQ(second.copies.size(), 2u);
  RunToEnd();
  ASSERT_EQ(Output(1).completions.size(), 3u);
  for (const Completion& c : Output(1).completions) EXPECT_EQ(c.token_ids, Expected(prompt, 2));
}

// Candidates: the next two letters, good (-0.1, -0.2) after an odd letter and
// poor (-2.0, -2.1) after an even one, then two fillers; EOS second when
// `with_eos`.
testing::BeamScript ParityBeams(bool with_eos) {
  return [with_eos](const std::vector<int32_t>& h) {
    const int32_t t = h.back();
    const bool odd = t % 2 == 1;
    std::vector<sampling::BeamToken> c = {{NextLetter(h), odd ? -0.1f : -2.0f, 0}};
    if (with_eos) c.push_back({kToyEos, -0.15f, 0});
    c.push_back({t % 31 + 2 > 31 ? 1 : t % 31 + 2, odd ? -0.2f : -2.1f, 0});
    c.push_back({(t + 2) % 31 + 1, -5.0f, 0});
    c.push_back({(t + 3) % 31 + 1, -6.0f, 0});
    for (auto& x : c) x.key = x.score;
    return c;
  };
}

GenerateRequest Beams(int64_t id, std::vector<int32_t> prompt, int32_t max_tokens,
                      EarlyStopping early_stopping) {
  GenerateRequest r = Greedy(id, std::move(prompt), max_tokens);
  r.beam.emplace();
  r.beam->num_beams = 2;
  r.beam->early_stopping = early_stopping;
  return r;
}

TEST_F(SchedulerCoreTest, RetiresBeamsNoMoveContinues) {
  Start(64, 4);
  group_->beam_candidates = ParityBeams(/*with_eos=*/false);
  Submit(Beams(1, Letters(1, 3), 4, EarlyStopping::kNever));  // ends with 'c' (odd)
  StepOk();  // the prompt: candidates d (-0.1), e (-0.2) start two beams
  StepOk();  // beam 'd' (even) continues poorly, beam 'e' (odd) well
  const worker::StepPlan& second = group_->last_plan();
  ASSERT_EQ(second.sequences.size(), 2u);
  ASSERT_EQ(second.new_sequences.size(), 1u) << "the second beam forks the first";
  const SeqId d_beam = second.sequences[0].id;
  StepOk();
  const worker::StepPlan& third = group_->last_plan();
  EXPECT_EQ(third.finished, std::vector<SeqId>{d_beam}) << "no move continued beam 'd'";
  EXPECT_EQ(third.new_sequences.size(), 1u) << "both new beams descend from 'e'";
  EXPECT_EQ(Find(third, d_beam), nullptr);
  RunToEnd();
  const RequestOutput& out = Output(1);
  ASSERT_EQ(out.completions.size(), 1u);
  EXPECT_EQ(out.completions[0].token_ids.size(), 4u);
  EXPECT_EQ(out.completions[0].token_ids[0], 5) << "through 'e'";
  EXPECT_EQ(out.completions[0].finish_reason, FinishReason::kLength);
}

TEST_F(SchedulerCoreTest, BeamSearchStopsEarlyOnceEnoughHypothesesEnd) {
  Start(64, 4);
  group_->beam_candidates = ParityBeams(/*with_eos=*/true);
  Submit(Beams(1, Letters(1, 3), 10, EarlyStopping::kTrue));
  RunToEnd();
  // EOS closes a hypothesis at each of the first two steps: two are done.
  EXPECT_LE(group_->plans().size(), 4u) << "stopped early, not at max_tokens";
  const RequestOutput& out = Output(1);
  ASSERT_EQ(out.completions.size(), 1u);
  EXPECT_EQ(out.completions[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(out.completions[0].token_ids.back(), kToyEos);
}

TEST_F(SchedulerCoreTest, RollsBackRejectedDrafts) {
  Start(64, 4);
  UseDrafts(3);
  // Right, wrong, right: the verifier keeps one draft.
  pool_.propose = [](const std::vector<int32_t>& h, int32_t gamma) {
    std::vector<int32_t> d = {NextLetter(h), kToyEos + 1, 3};
    d.resize(gamma);
    return d;
  };
  const std::vector<int32_t> prompt = Letters(5, 6);
  Submit(Greedy(1, prompt, 12));
  StepOk();  // prefill
  StepOk();  // the first verification
  const SeqId seq = SeqOf(prompt);
  const worker::SequenceStep* step = Find(group_->last_plan(), seq);
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->num_draft_tokens, 3);
  // 7 tokens before the round; the draft held them plus 2 drafts; the
  // sequence kept 1 draft and the correction: roll back to 7 + 1.
  ASSERT_FALSE(pool_.releases.empty());
  EXPECT_EQ(pool_.releases.back().seq, seq);
  EXPECT_EQ(pool_.releases.back().keep_length, 8);
  EXPECT_EQ(pool_.held(seq), 8);
  RunToEnd();
  EXPECT_EQ(Output(1).completions[0].token_ids, Expected(prompt, 12)) << "verification is exact";
  EXPECT_GT(Output(1).num_accepted_tokens, 0);
  EXPECT_LT(Output(1).num_accepted_tokens, Output(1).num_draft_tokens);
}

TEST_F(SchedulerCoreTest, RollsBackDraftsLeftOutOfTheStep) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 4;
  Start(64, 4, config);
  UseDrafts(2);
  pool_.propose = [](const std::vector<int32_t>& h, int32_t gamma) {
    return std::vector<int32_t>(gamma, NextLetter(h));
  };
  const std::vector<int32_t> a = Letters(1, 2), b = Letters(12, 2);
  Submit(Greedy(1, a, 6));
  Submit(Greedy(2, b, 6));
  StepOk();  // both prompts, one token each
  StepOk();  // both proposed; the first takes its token + 2 drafts, the second only its token
  const SeqId a_id = SeqOf(a), b_id = SeqOf(b);
  EXPECT_EQ(Find(group_->last_plan(), a_id)->num_draft_tokens, 2);
  EXPECT_EQ(Find(group_->last_plan(), b_id)->num_draft_tokens, 0) << "no budget left";
  // The draft held 3 tokens + 1 proposed; it goes back to the 3.
  ASSERT_FALSE(pool_.releases.empty());
  EXPECT_EQ(pool_.releases[0].seq, b_id);
  EXPECT_EQ(pool_.releases[0].keep_length, 3);
  RunToEnd();
  EXPECT_EQ(Output(1).completions[0].token_ids, Expected(a, 6));
  EXPECT_EQ(Output(2).completions[0].token_ids, Expected(b, 6));
}

TEST_F(SchedulerCoreTest, FeedsPromptsToTheDraftInChunks) {
  Start(64, 4);
  UseDrafts(2, /*max_draft_prefill_tokens=*/8);
  pool_.propose = [](const std::vector<int32_t>& h, int32_t gamma) {
    std::vector<int32_t> d = h;
    for (int32_t i = 0; i < gamma; ++i) d.push_back(NextLetter(d));
    return std::vector<int32_t>(d.end() - gamma, d.end());
  };
  const std::vector<int32_t> a = Letters(1, 12), b = Letters(5, 12), c = Letters(9, 12);
  for (int id = 1; const std::vector<int32_t>* p : {&a, &b, &c}) Submit(Greedy(id++, *p, 16));
  RunToEnd();
  // Each round: at most 8 catch-up tokens, plus the steady sequences'
  // accepted drafts and correction (<= gamma + 1 = 3 each).
  ASSERT_FALSE(pool_.tokens_per_call.empty());
  for (int64_t sent : pool_.tokens_per_call) EXPECT_LE(sent, 8 + 3 * 3);
  EXPECT_EQ(pool_.tokens_per_call.front(), 8) << "the first prompt goes in a chunk alone";
  int id = 1;
  for (const std::vector<int32_t>* p : {&a, &b, &c}) {
    const RequestOutput& out = Output(id++);
    EXPECT_EQ(out.completions[0].token_ids, Expected(*p, 16)) << "verification is exact";
    EXPECT_GT(out.num_accepted_tokens, 0) << "request " << id - 1 << " never speculated";
  }
}

class CancelTest : public SchedulerCoreTest {
 protected:
  // Submits `r`, runs `steps` steps, cancels it and runs everything to the
  // end; its output.
  const RequestOutput& CancelAfter(const GenerateRequest& r, int steps) {
    Submit(r);
    for (int i = 0; i < steps; ++i) StepOk();
    EXPECT_FALSE(rec_.outputs.contains(r.id.value())) << "finished before the cancel";
    scheduler_->Cancel(r.id);
    RunToEnd();
    const RequestOutput& out = Output(r.id.value());
    EXPECT_TRUE(out.status.ok()) << out.status;
    for (const Completion& c : out.completions) {
      EXPECT_EQ(c.finish_reason, FinishReason::kCancelled);
    }
    EXPECT_EQ(scheduler_->load(), 0);
    return out;
  }
};

TEST_F(CancelTest, WhileQueued) {
  Start(64, 4);
  const std::vector<int32_t> prompt = Letters(1, 5);
  const RequestOutput& out = CancelAfter(Greedy(1, prompt, 8), 0);
  EXPECT_TRUE(out.completions[0].token_ids.empty());
  EXPECT_FALSE(SeqOf(prompt).value() >= 0) << "a queued request never reaches the worker";
}

TEST_F(CancelTest, WhileWaitingForBlocks) {
  Start(3, 4);
  Submit(Greedy(1, Letters(1, 8), 4));
  const std::vector<int32_t> prompt = Letters(10, 8);
  const RequestOutput& out = CancelAfter(Greedy(2, prompt, 4), 2);
  EXPECT_TRUE(out.completions[0].token_ids.empty());
  EXPECT_FALSE(SeqOf(prompt).value() >= 0);
  EXPECT_EQ(Output(1).completions[0].finish_reason, FinishReason::kLength) << "unaffected";
}

TEST_F(CancelTest, MidPrefill) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 4;
  Start(64, 4, config);
  const std::vector<int32_t> prompt = Letters(1, 12);
  const RequestOutput& out = CancelAfter(Greedy(1, prompt, 8), 1);
  EXPECT_TRUE(out.completions[0].token_ids.empty());
  EXPECT_EQ(group_->plans()[1].finished, std::vector<SeqId>{SeqOf(prompt)});
}

TEST_F(CancelTest, ForkParentBeforeTheFork) {
  SchedulerConfig config;
  config.max_num_batched_tokens = 4;
  Start(64, 4, config);
  GenerateRequest r = Greedy(1, Letters(1, 12), 8);
  r.params.n = 2;
  const RequestOutput& out = CancelAfter(r, 1);
  ASSERT_EQ(out.completions.size(), 2u);
  for (const worker::StepPlan& plan : group_->plans()) {
    EXPECT_LE(plan.new_sequences.size(), 1u) << "no child was forked";
  }
}

TEST_F(CancelTest, WhileSpeculating) {
  Start(64, 4);
  UseDrafts(2);
  pool_.propose = [](const std::vector<int32_t>& h, int32_t gamma) {
    return std::vector<int32_t>(gamma, NextLetter(h));
  };
  const std::vector<int32_t> prompt = Letters(1, 5);
  const RequestOutput& out = CancelAfter(Greedy(1, prompt, 40), 3);
  // Tokens so far are kept; RunToEnd checked the draft forgot the sequence.
  const std::vector<int32_t>& tokens = out.completions[0].token_ids;
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(tokens, Expected(prompt, static_cast<int32_t>(tokens.size())));
  EXPECT_GT(pool_.num_proposals, 0);
}

TEST_F(CancelTest, MidBeamSearch) {
  Start(64, 4);
  group_->beam_candidates = ParityBeams(/*with_eos=*/false);
  const RequestOutput& out = CancelAfter(Beams(1, Letters(1, 3), 20, EarlyStopping::kNever), 3);
  ASSERT_EQ(out.completions.size(), 1u) << "the best beam so far";
  EXPECT_EQ(out.completions[0].token_ids.size(), 3u);
}

TEST_F(SchedulerCoreTest, AFailedStepFailsItsRequestsWithTheStatus) {
  Start(64, 4);
  const std::vector<int32_t> a = Letters(1, 4), b = Letters(9, 4);
  Submit(Greedy(1, a, 8));
  Submit(Greedy(2, b, 8));
  StepOk();
  group_->FailNextStep(absl::UnavailableError("connection to 127.0.0.1:1 lost"));
  absl::StatusOr<bool> failed = scheduler_->Step();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  for (int64_t id : {1, 2}) {
    const RequestOutput& out = Output(id);
    EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable) << out.status;
    EXPECT_NE(out.status.message().find("connection to 127.0.0.1:1 lost"),
              std::string_view::npos);
    EXPECT_NE(out.status.message().find("worker step 2 failed"), std::string_view::npos)
        << out.status;
    EXPECT_EQ(out.completions[0].finish_reason, FinishReason::kError);
    EXPECT_EQ(out.completions[0].token_ids.size(), 1u) << "the token before the failure";
  }
  // The group still works: a new request runs to its end.
  Submit(Greedy(3, a, 3));
  RunToEnd();
  EXPECT_TRUE(Output(3).status.ok());
  EXPECT_EQ(Output(3).completions[0].token_ids, Expected(a, 3));
}

TEST_F(SchedulerCoreTest, ValidatesEveryRequestOnce) {
  Start(64, 4);
  auto code = [&](GenerateRequest r) { return scheduler_->Submit(std::move(r)); };
  GenerateRequest too_long = Greedy(1, Letters(1, 200), 100);
  absl::Status s = code(too_long);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("200"), std::string_view::npos) << s;
  EXPECT_NE(s.message().find("max_tokens 100"), std::string_view::npos) << s;
  EXPECT_NE(s.message().find("256"), std::string_view::npos) << s;
  GenerateRequest one_beam = Beams(2, Letters(1, 3), 4, EarlyStopping::kFalse);
  one_beam.beam->num_beams = 1;
  s = code(one_beam);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_beams 1"), std::string_view::npos) << s;
  GenerateRequest gamma = Greedy(3, Letters(1, 3), 4);
  gamma.num_speculative_tokens = 65;
  s = code(gamma);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("65"), std::string_view::npos) << s;
  EXPECT_EQ(code(Greedy(4, Letters(1, 3), 253)).code(), absl::StatusCode::kOk) << "fits exactly";
}

}  // namespace
}  // namespace tandem::coordinator
