// Speculative decoding in the scheduler over an in-process n-gram draft: no
// KV block and no draft sequence outlives its request after many rollbacks,
// with n > 1, sampling, preemption and cancellation in the mix; the counters
// add up; a request can turn speculation off.
#include <map>
#include <memory>

#include "coordinator/cluster/local_draft_pool.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/scheduler/scheduler.h"
#include "draft/proposer_factory.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "tests/unit/coordinator/default_model_test.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::coordinator {
namespace {

class Outputs : public RequestObserver {
 public:
  void OnDelta(const CompletionDelta&) override {}
  void OnFinished(const RequestOutput& o) override { outputs[o.id.value()] = o; }
  std::map<int64_t, RequestOutput> outputs;
};

class SpeculativeSchedulerTest : public testing::DefaultModelTest {
 protected:
  // A scheduler over `num_blocks` KV blocks with an n-gram draft (gamma 4).
  void Start(int32_t num_blocks) {
    worker::StepExecutorConfig ec;
    ec.num_blocks = num_blocks;
    ec.block_size = 16;
    ec.eos_token_ids = tokenizer_->EndOfGenerationIds();
    auto g = LocalWorkerGroup::Create(model_, ec);
    ASSERT_TRUE(g.ok()) << g.status();
    group_ = *std::move(g);
    draft::ProposerOptions po;
    po.spec.kind = draft::ProposerKind::kNgram;
    po.vocab_size = tokenizer_->vocab_size();
    auto proposer = draft::MakeProposer(po);
    ASSERT_TRUE(proposer.ok()) << proposer.status();
    pool_ = std::make_unique<LocalDraftPool>(*std::move(proposer));
    scheduler_ = std::make_unique<Scheduler>(SchedulerConfig{}, group_.get(), tokenizer_, &out_);
    SpeculationConfig config;
    config.num_speculative_tokens = 4;
    scheduler_->set_draft_pool(pool_.get(), config);
  }

  // A prompt that repeats itself, so the n-gram draft is often right.
  static GenerateRequest Repetitive(int64_t id, int32_t max_tokens) {
    GenerateRequest r;
    r.id = RequestId(id);
    for (int rep = 0; rep < 6; ++rep) {
      for (int32_t t = 0; t < 9; ++t) r.prompt_tokens.push_back(300 + 13 * t + static_cast<int32_t>(id));
    }
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0.0f;
    return r;
  }

  void RunToEnd() {
    for (int i = 0; i < 20000 && scheduler_->HasWork(); ++i) {
      absl::StatusOr<bool> stepped = scheduler_->Step();
      ASSERT_TRUE(stepped.ok()) << stepped.status();
    }
    ASSERT_FALSE(scheduler_->HasWork());
  }

  std::unique_ptr<LocalWorkerGroup> group_;
  std::unique_ptr<LocalDraftPool> pool_;
  Outputs out_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SpeculativeSchedulerTest, NothingLeaksAfterRollbacksSamplingForksAndPreemption) {
  // 48 blocks: a dozen long sequences do not fit at once, so some are
  // preempted (their drafts forgotten and restarted).
  Start(/*num_blocks=*/48);
  int64_t id = 1;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(scheduler_->Submit(Repetitive(id++, 40)).ok());
  GenerateRequest sampled = Repetitive(id++, 40);
  sampled.params.temperature = 0.8f;
  sampled.params.n = 3;
  sampled.params.seed = 11;
  ASSERT_TRUE(scheduler_->Submit(sampled).ok());
  GenerateRequest cancelled = Repetitive(id++, 200);
  ASSERT_TRUE(scheduler_->Submit(cancelled).ok());
  GenerateRequest off = Repetitive(id++, 24);
  off.num_speculative_tokens = 0;
  ASSERT_TRUE(scheduler_->Submit(off).ok());
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(scheduler_->Step().ok());
  scheduler_->Cancel(cancelled.id);
  RunToEnd();

  EXPECT_EQ(scheduler_->kv_stats().num_blocks_used, 0) << "target KV blocks leaked";
  EXPECT_EQ(pool_->proposer().num_sequences(), 0) << "draft sequences leaked";
  const SchedulerStats& st = scheduler_->stats();
  EXPECT_GT(st.num_speculative_rounds, 0);
  EXPECT_GT(st.num_accepted_tokens, 0);
  EXPECT_LE(st.num_accepted_tokens, st.num_draft_tokens);
  EXPECT_EQ(out_.outputs.at(off.id.value()).num_draft_tokens, 0) << "a request turned it off";
  EXPECT_EQ(out_.outputs.at(sampled.id.value()).completions.size(), 3u);
  for (const auto& [rid, o] : out_.outputs) {
    EXPECT_TRUE(o.status.ok()) << rid << ": " << o.status;
    EXPECT_LE(o.num_accepted_tokens, o.num_draft_tokens);
  }
}

TEST_F(SpeculativeSchedulerTest, GreedyOutputEqualsPlainDecoding) {
  Start(/*num_blocks=*/512);
  for (int64_t id = 1; id <= 6; ++id) ASSERT_TRUE(scheduler_->Submit(Repetitive(id, 32)).ok());
  RunToEnd();
  std::map<int64_t, std::vector<int32_t>> speculative;
  for (const auto& [rid, o] : out_.outputs) speculative[rid] = o.completions[0].token_ids;
  EXPECT_GT(scheduler_->stats().num_accepted_tokens, 0);

  out_.outputs.clear();
  Start(/*num_blocks=*/512);
  for (int64_t id = 1; id <= 6; ++id) {
    GenerateRequest r = Repetitive(id, 32);
    r.num_speculative_tokens = 0;
    ASSERT_TRUE(scheduler_->Submit(r).ok());
  }
  RunToEnd();
  EXPECT_EQ(scheduler_->stats().num_draft_tokens, 0);
  for (const auto& [rid, o] : out_.outputs) {
    EXPECT_EQ(o.completions[0].token_ids, speculative[rid]) << "request " << rid;
  }
}

}  // namespace
}  // namespace tandem::coordinator
