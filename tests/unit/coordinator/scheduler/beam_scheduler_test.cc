// Beam search in the scheduler: copy-on-write forks keep a 4-beam search
// over a long prompt close to one sequence's KV footprint, the prompt is
// prefilled once, cancellation frees every beam. (Equality with
// transformers is tests/integration/beam_test.py.)
#include <algorithm>
#include <map>
#include <memory>

#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/scheduler/scheduler.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "tests/unit/coordinator/default_model_test.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::coordinator {
namespace {

class Finished : public RequestObserver {
 public:
  void OnDelta(const CompletionDelta& d) override {
    if (d.replace) ++num_replacements;
  }
  void OnFinished(const RequestOutput& o) override { outputs[o.id.value()] = o; }
  std::map<int64_t, RequestOutput> outputs;
  int num_replacements = 0;
};

class BeamSchedulerTest : public testing::DefaultModelTest {
 protected:
  void SetUp() override {
    worker::StepExecutorConfig ec;
    ec.num_blocks = 1024;
    ec.block_size = 16;
    ec.eos_token_ids = tokenizer_->EndOfGenerationIds();
    auto g = LocalWorkerGroup::Create(model_, ec);
    ASSERT_TRUE(g.ok()) << g.status();
    group_ = *std::move(g);
    scheduler_ = std::make_unique<Scheduler>(SchedulerConfig{}, group_.get(), tokenizer_, &finished_);
  }

  static GenerateRequest LongPromptRequest(int64_t id, int32_t max_tokens,
                                           std::optional<BeamSearchParams> beam) {
    GenerateRequest r;
    r.id = RequestId(id);
    for (int32_t i = 0; i < 1024; ++i) r.prompt_tokens.push_back(200 + (i * 37) % 5000);
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;  // the search runs its full length
    r.beam = beam;
    return r;
  }

  // Runs until idle; returns the most KV blocks in use after any step.
  int32_t RunToEnd() {
    int32_t peak = 0;
    for (int i = 0; i < 10000 && scheduler_->HasWork(); ++i) {
      absl::StatusOr<bool> stepped = scheduler_->Step();
      EXPECT_TRUE(stepped.ok()) << stepped.status();
      peak = std::max(peak, scheduler_->kv_stats().num_blocks_used);
    }
    EXPECT_FALSE(scheduler_->HasWork());
    EXPECT_EQ(scheduler_->kv_stats().num_blocks_used, 0) << "blocks leaked";
    return peak;
  }

  std::unique_ptr<LocalWorkerGroup> group_;
  Finished finished_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(BeamSchedulerTest, FourBeamsOverALongPromptHoldAtMost1_3TimesOneSequence) {
  constexpr int32_t kMaxTokens = 48;
  ASSERT_TRUE(scheduler_->Submit(LongPromptRequest(1, kMaxTokens, std::nullopt)).ok());
  const int32_t one_sequence = RunToEnd();

  BeamSearchParams beam;
  beam.num_beams = 4;
  beam.num_return_sequences = 4;
  ASSERT_TRUE(scheduler_->Submit(LongPromptRequest(2, kMaxTokens, beam)).ok());
  const int64_t prompt_before = scheduler_->stats().num_prompt_tokens_computed;
  // The first request's prompt blocks are cached: drop them so the beam
  // search computes (and holds) its whole prompt itself.
  scheduler_->ResetKvCache();
  const int32_t four_beams = RunToEnd();

  const RequestOutput& out = finished_.outputs.at(2);
  ASSERT_EQ(out.completions.size(), 4u);
  for (const Completion& c : out.completions) {
    EXPECT_EQ(c.token_ids.size(), static_cast<size_t>(kMaxTokens));
    EXPECT_TRUE(c.score.has_value());
  }
  EXPECT_GT(finished_.num_replacements, 0) << "the best beam was never streamed";
  // The prompt was prefilled once, not once per beam.
  EXPECT_EQ(scheduler_->stats().num_prompt_tokens_computed - prompt_before, 1024);
  EXPECT_LE(four_beams, 1.3 * one_sequence)
      << "4 beams held " << four_beams << " blocks; one sequence " << one_sequence;
}

TEST_F(BeamSchedulerTest, CancellingABeamSearchFreesEveryBeam) {
  BeamSearchParams beam;
  beam.num_beams = 4;
  ASSERT_TRUE(scheduler_->Submit(LongPromptRequest(3, 200, beam)).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(scheduler_->Step().ok());
  EXPECT_GT(scheduler_->kv_stats().num_blocks_used, 64);
  scheduler_->Cancel(RequestId(3));
  RunToEnd();
  ASSERT_TRUE(finished_.outputs.contains(3));
  ASSERT_EQ(finished_.outputs.at(3).completions.size(), 1u);
  EXPECT_EQ(finished_.outputs.at(3).completions[0].finish_reason, FinishReason::kCancelled);
}

TEST_F(BeamSchedulerTest, InvalidBeamRequestsNameTheValue) {
  GenerateRequest r = LongPromptRequest(4, 8, BeamSearchParams{});
  r.beam->num_beams = 3;
  r.beam->num_beam_groups = 2;
  absl::Status s = scheduler_->Submit(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_beam_groups 2"), std::string::npos) << s;

  r = LongPromptRequest(5, 8, BeamSearchParams{});
  r.beam->num_beams = 2;
  r.params.n = 2;
  s = scheduler_->Submit(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n 2"), std::string::npos) << s;

  r = LongPromptRequest(7, 8, BeamSearchParams{});
  r.beam->num_beams = 2;
  r.beam->do_sample = true;
  r.params.temperature = 0.0f;
  s = scheduler_->Submit(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("temperature 0 with do_sample"), std::string::npos) << s;

  r = LongPromptRequest(6, 8, BeamSearchParams{});
  r.beam->num_beams = 64;
  s = scheduler_->Submit(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_beams 64"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem::coordinator
