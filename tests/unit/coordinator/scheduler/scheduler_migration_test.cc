// Request migration between schedulers over the real default model: a group
// fails one step, its scheduler evicts the step's requests and a second
// scheduler (its own group and KV cache) resumes them. Greedy, seeded
// sampling, n = 2, beam search, logprobs and speculative decoding end with
// exactly the outputs of an unfailed run, the streamed text equals the final
// text (nothing repeated or lost), and no KV block leaks on either side.
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "coordinator/cluster/local_draft_pool.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/scheduler/scheduler.h"
#include "draft/proposer_factory.h"
#include "gtest/gtest.h"
#include "tests/unit/coordinator/default_model_test.h"

namespace tandem::coordinator {
namespace {

using StreamKey = std::pair<int64_t, int32_t>;

// The client's view: streamed text per completion (beam deltas replace) and
// the final outputs.
class Client : public RequestObserver {
 public:
  void OnDelta(const CompletionDelta& d) override {
    std::string& text = streamed[{d.id.value(), d.index}];
    text = d.replace ? d.text : text + d.text;
  }
  void OnFinished(const RequestOutput& o) override { outputs[o.id.value()] = o; }
  std::map<StreamKey, std::string> streamed;
  std::map<int64_t, RequestOutput> outputs;
};

// Fails the Steps `fails(n)` picks (n from 1) as a lost worker would; the
// others run on `inner`.
class FlakyGroup : public WorkerGroup {
 public:
  FlakyGroup(WorkerGroup* inner, std::function<bool(int)> fails)
      : inner_(inner), fails_(std::move(fails)) {}
  const WorkerGroupInfo& info() const override { return inner_->info(); }
  absl::StatusOr<worker::StepResult> Step(const worker::StepPlan& plan) override {
    if (fails_(++steps_)) return absl::UnavailableError("injected: the worker is gone");
    return inner_->Step(plan);
  }

 private:
  WorkerGroup* inner_;
  std::function<bool(int)> fails_;
  int steps_ = 0;
};

// One scheduler over its own in-process group, optionally failing a step and
// optionally speculating with an n-gram draft.
struct Replica {
  Replica(model::Model* model, const tokenizer::Tokenizer* tok, RequestObserver* client,
          int fail_at, bool speculate) {
    worker::StepExecutorConfig ec;
    ec.num_blocks = 512;
    ec.block_size = 16;
    ec.eos_token_ids = tok->EndOfGenerationIds();
    auto created = LocalWorkerGroup::Create(model, ec);
    CHECK(created.ok(), "%s", created.status().ToString());
    local = *std::move(created);
    flaky = std::make_unique<FlakyGroup>(local.get(), [fail_at](int n) { return n == fail_at; });
    scheduler = std::make_unique<Scheduler>(SchedulerConfig{}, flaky.get(), tok, client);
    scheduler->set_evict_on_failure(true);
    if (speculate) {
      draft::ProposerOptions po;
      po.spec.kind = draft::ProposerKind::kNgram;
      po.vocab_size = tok->vocab_size();
      auto proposer = draft::MakeProposer(po);
      CHECK(proposer.ok(), "%s", proposer.status().ToString());
      drafts = std::make_unique<LocalDraftPool>(*std::move(proposer));
      SpeculationConfig config;
      config.num_speculative_tokens = 3;
      scheduler->set_draft_pool(drafts.get(), config);
    }
  }
  std::unique_ptr<LocalWorkerGroup> local;
  std::unique_ptr<FlakyGroup> flaky;
  std::unique_ptr<LocalDraftPool> drafts;
  std::unique_ptr<Scheduler> scheduler;
};

class SchedulerMigrationTest : public testing::DefaultModelTest {
 protected:
  GenerateRequest Request(int64_t id, const std::string& text, int32_t max_tokens) {
    GenerateRequest r;
    r.id = RequestId(id);
    r.prompt_tokens = tokenizer_->Encode(text, true, true);
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0.0f;
    r.params.ignore_eos = true;
    return r;
  }

  // Greedy, seeded sampling with logprobs, n = 2, a stop string and 4 beams.
  std::vector<GenerateRequest> Mix() {
    std::vector<GenerateRequest> mix;
    mix.push_back(Request(1, "The capital of France is", 24));
    GenerateRequest sampled = Request(2, "Once upon a time", 24);
    sampled.params.temperature = 0.9f;
    sampled.params.top_p = 0.95f;
    sampled.params.seed = 7;
    sampled.params.logprobs = 2;
    mix.push_back(sampled);
    GenerateRequest forked = Request(3, "List three colors:", 16);
    forked.params.n = 2;
    forked.params.temperature = 0.8f;
    forked.params.seed = 11;
    mix.push_back(forked);
    GenerateRequest stopped = Request(4, "Count: one, two, three,", 40);
    stopped.params.stop = {"six"};
    mix.push_back(stopped);
    GenerateRequest beams = Request(5, "The best way to learn is", 12);
    beams.beam = BeamSearchParams{.num_beams = 4, .num_return_sequences = 2};
    mix.push_back(beams);
    return mix;
  }

  // Runs `requests` on `a`; every request `a` evicts resumes on `b`. Both
  // step until idle. Returns how many moved.
  int RunMigrating(std::vector<GenerateRequest> requests, Replica& a, Replica& b) {
    int moved = 0;
    for (GenerateRequest& r : requests) CHECK(a.scheduler->Submit(std::move(r)).ok());
    for (int i = 0; i < 20000 && (a.scheduler->HasWork() || b.scheduler->HasWork()); ++i) {
      if (a.scheduler->HasWork()) (void)a.scheduler->Step();  // one failure is expected
      for (MigratingRequest& m : a.scheduler->TakeEvicted()) {
        EXPECT_EQ(m.cause().code(), absl::StatusCode::kUnavailable);
        b.scheduler->Resume(std::move(m));
        ++moved;
      }
      if (b.scheduler->HasWork()) EXPECT_TRUE(b.scheduler->Step().ok());
    }
    EXPECT_FALSE(a.scheduler->HasWork() || b.scheduler->HasWork());
    EXPECT_EQ(a.scheduler->kv_stats().num_blocks_used, 0) << "blocks leaked on the failed group";
    EXPECT_EQ(b.scheduler->kv_stats().num_blocks_used, 0) << "blocks leaked on the new group";
    return moved;
  }

  // Drops the sampled requests (2 and 3): speculative sampling is exact in
  // distribution, not in the RNG draws, so only greedy and beam outputs
  // match plain decoding token for token.
  static void KeepDeterministic(Client& c) {
    for (int64_t id : {2, 3}) {
      c.outputs.erase(id);
      for (int32_t k = 0; k < 2; ++k) c.streamed.erase({id, k});
    }
  }

  static void ExpectSameOutputs(const Client& got, const Client& want) {
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    for (const auto& [id, w] : want.outputs) {
      const RequestOutput& g = got.outputs.at(id);
      EXPECT_TRUE(g.status.ok()) << "request " << id << ": " << g.status;
      ASSERT_EQ(g.completions.size(), w.completions.size()) << "request " << id;
      for (size_t k = 0; k < w.completions.size(); ++k) {
        const Completion& gc = g.completions[k];
        const Completion& wc = w.completions[k];
        EXPECT_EQ(gc.token_ids, wc.token_ids) << "request " << id << " completion " << k;
        EXPECT_EQ(gc.text, wc.text) << "request " << id << " completion " << k;
        EXPECT_EQ(gc.finish_reason, wc.finish_reason) << "request " << id;
        ASSERT_EQ(gc.logprobs.size(), wc.logprobs.size()) << "request " << id;
        for (size_t p = 0; p < wc.logprobs.size(); ++p) {
          EXPECT_EQ(gc.logprobs[p].token, wc.logprobs[p].token);
          EXPECT_NEAR(gc.logprobs[p].logprob, wc.logprobs[p].logprob, 1e-4);
        }
      }
    }
    // What the client saw streamed is the final text: no token repeated or lost.
    for (const auto& [key, text] : got.streamed) {
      const RequestOutput& o = got.outputs.at(key.first);
      ASSERT_LT(static_cast<size_t>(key.second), o.completions.size());
      EXPECT_EQ(text, o.completions[key.second].text)
          << "request " << key.first << " completion " << key.second;
    }
  }

  Client Baseline() {
    Client want;
    Replica only(model_, tokenizer_, &want, /*fail_at=*/-1, /*speculate=*/false);
    for (GenerateRequest& r : Mix()) CHECK(only.scheduler->Submit(std::move(r)).ok());
    for (int i = 0; i < 20000 && only.scheduler->HasWork(); ++i) {
      CHECK(only.scheduler->Step().ok());
    }
    return want;
  }
};

TEST_F(SchedulerMigrationTest, EvictedRequestsResumeWithTheSameOutputs) {
  const Client want = Baseline();
  // Step 1 prefills (nothing generated yet), 3 and 9 fail mid-decode: forks
  // made, beams branched, stop string partly matched.
  for (int fail_at : {1, 3, 9}) {
    SCOPED_TRACE(absl::StrCat("failing step ", fail_at));
    Client got;
    Replica a(model_, tokenizer_, &got, fail_at, /*speculate=*/false);
    Replica b(model_, tokenizer_, &got, /*fail_at=*/-1, /*speculate=*/false);
    const int moved = RunMigrating(Mix(), a, b);
    ExpectSameOutputs(got, want);
    int migrated = 0;
    for (const auto& [id, o] : got.outputs) migrated += o.num_migrations;
    EXPECT_GE(moved, 4) << "the failed step carried most of the mix";
    EXPECT_EQ(migrated, moved) << "every evicted request counts one move";
  }
}

TEST_F(SchedulerMigrationTest, SpeculatingOnEitherSideKeepsTheOutputs) {
  Client want = Baseline();
  KeepDeterministic(want);
  for (bool speculate_first : {true, false}) {
    SCOPED_TRACE(speculate_first ? "speculating, then plain" : "plain, then speculating");
    Client got;
    Replica a(model_, tokenizer_, &got, /*fail_at=*/6, speculate_first);
    Replica b(model_, tokenizer_, &got, /*fail_at=*/-1, !speculate_first);
    EXPECT_GE(RunMigrating(Mix(), a, b), 3);
    KeepDeterministic(got);
    ExpectSameOutputs(got, want);
  }
}

TEST_F(SchedulerMigrationTest, FinishEndsAnEvictedRequestWithItsStatusAndText) {
  Client got;
  Replica a(model_, tokenizer_, &got, /*fail_at=*/4, /*speculate=*/false);
  ASSERT_TRUE(a.scheduler->Submit(Request(1, "The capital of France is", 24)).ok());
  GenerateRequest beams = Request(2, "The best way to learn is", 12);
  beams.beam = BeamSearchParams{.num_beams = 4};
  ASSERT_TRUE(a.scheduler->Submit(std::move(beams)).ok());
  std::vector<MigratingRequest> evicted;
  for (int i = 0; i < 10 && evicted.empty(); ++i) {
    (void)a.scheduler->Step();
    evicted = a.scheduler->TakeEvicted();
  }
  ASSERT_EQ(evicted.size(), 2u);
  EXPECT_EQ(a.scheduler->load(), 0);
  EXPECT_EQ(a.scheduler->kv_stats().num_blocks_used, 0);
  a.scheduler->Finish(std::move(evicted[0]), FinishReason::kError,
                      absl::UnavailableError("no group"));
  a.scheduler->Finish(std::move(evicted[1]), FinishReason::kCancelled, absl::CancelledError(""));
  ASSERT_EQ(got.outputs.size(), 2u);
  const RequestOutput& failed = got.outputs.at(1);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed.completions[0].finish_reason, FinishReason::kError);
  EXPECT_FALSE(failed.completions[0].token_ids.empty()) << "tokens before the failure are kept";
  EXPECT_EQ(got.streamed[StreamKey(1, 0)], failed.completions[0].text);
  EXPECT_EQ(got.outputs.at(2).completions[0].finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(a.scheduler->load(), 0);
  EXPECT_FALSE(a.scheduler->HasWork());
}

TEST_F(SchedulerMigrationTest, StrikesCountFailuresWithoutProgressOnly) {
  // Steps 3 and 8 fail with tokens generated in between, then 10 and 11 with
  // none: strikes 1, 1, 2... The request resumes where it was each time.
  Client got;
  Replica a(model_, tokenizer_, &got, /*fail_at=*/-1, /*speculate=*/false);
  a.flaky = std::make_unique<FlakyGroup>(
      a.local.get(), [](int n) { return n == 3 || n == 8 || n == 10 || n == 11; });
  a.scheduler = std::make_unique<Scheduler>(SchedulerConfig{}, a.flaky.get(), tokenizer_, &got);
  a.scheduler->set_evict_on_failure(true);
  ASSERT_TRUE(a.scheduler->Submit(Request(1, "The capital of France is", 24)).ok());
  std::vector<int32_t> strikes;
  for (int i = 0; i < 200 && a.scheduler->HasWork(); ++i) {
    (void)a.scheduler->Step();
    for (MigratingRequest& m : a.scheduler->TakeEvicted()) {
      strikes.push_back(m.num_strikes());
      a.scheduler->Resume(std::move(m));
    }
  }
  EXPECT_EQ(strikes, (std::vector<int32_t>{1, 1, 1, 2}));
  ASSERT_EQ(got.outputs.size(), 1u);
  EXPECT_EQ(got.outputs.at(1).num_migrations, 4);
  EXPECT_EQ(got.outputs.at(1).completions[0].token_ids.size(), 24u);
}

TEST_F(SchedulerMigrationTest, EvictAllMovesEveryRequestUncharged) {
  Client got;
  Replica a(model_, tokenizer_, &got, /*fail_at=*/-1, /*speculate=*/false);
  ASSERT_TRUE(a.scheduler->Submit(Request(1, "The capital of France is", 24)).ok());
  ASSERT_TRUE(a.scheduler->Step().ok());  // request 1 runs; request 2 is still queued
  ASSERT_TRUE(a.scheduler->Submit(Request(2, "Once upon a time", 24)).ok());
  a.scheduler->EvictAll(absl::UnavailableError("the group is down"));
  std::vector<MigratingRequest> evicted = a.scheduler->TakeEvicted();
  ASSERT_EQ(evicted.size(), 2u);
  for (const MigratingRequest& m : evicted) EXPECT_EQ(m.num_strikes(), 0);
  EXPECT_FALSE(a.scheduler->HasWork());
  EXPECT_EQ(a.scheduler->load(), 0);
  EXPECT_EQ(a.scheduler->kv_stats().num_blocks_used, 0);
}

}  // namespace
}  // namespace tandem::coordinator
