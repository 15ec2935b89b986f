// The scheduler over the in-process worker group and the real default model:
// continuous batching, chunked prefill, preemption, n > 1 forks, prefix
// cache, cancellation, stop conditions and request validation.
#include "coordinator/scheduler/scheduler.h"

#include <map>
#include <set>
#include <memory>

#include "coordinator/cluster/local_worker_group.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "tests/unit/coordinator/default_model_test.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::coordinator {
namespace {

class Collect : public RequestObserver {
 public:
  void OnDelta(const CompletionDelta& d) override { streamed[{d.id.value(), d.index}] += d.text; }
  void OnFinished(const RequestOutput& o) override { outputs[o.id.value()] = o; }
  std::map<std::pair<int64_t, int32_t>, std::string> streamed;
  std::map<int64_t, RequestOutput> outputs;
};

// A scheduler over a fresh in-process group of `num_blocks` KV blocks.
struct Harness {
  Harness(model::Model* model, const tokenizer::Tokenizer* tokenizer, int32_t num_blocks,
          const SchedulerConfig& config = {}) {
    worker::StepExecutorConfig ec;
    ec.num_blocks = num_blocks;
    ec.block_size = 16;
    ec.eos_token_ids = tokenizer->EndOfGenerationIds();
    auto created = LocalWorkerGroup::Create(model, ec);
    CHECK(created.ok(), "%s", created.status().ToString());
    group = *std::move(created);
    scheduler = std::make_unique<Scheduler>(config, group.get(), tokenizer, &collect);
  }
  std::unique_ptr<LocalWorkerGroup> group;
  Collect collect;
  std::unique_ptr<Scheduler> scheduler;
};

class SchedulerTest : public testing::DefaultModelTest {
 protected:
  // Runs `requests` to completion on a fresh group with `num_blocks` blocks.
  std::map<int64_t, RequestOutput> Run(std::vector<GenerateRequest> requests,
                                       int32_t num_blocks = 1024, SchedulerConfig config = {},
                                       SchedulerStats* stats = nullptr) {
    Harness h(model_, tokenizer_, num_blocks, config);
    Scheduler& scheduler = *h.scheduler;
    Collect& collect = h.collect;
    for (auto& r : requests) CHECK(scheduler.Submit(r).ok());
    for (int i = 0; i < 100000 && scheduler.HasWork(); ++i) CHECK(scheduler.Step().ok());
    EXPECT_FALSE(scheduler.HasWork());
    kv::KvStats kv = scheduler.kv_stats();
    EXPECT_EQ(kv.num_blocks_used, 0) << "blocks leaked";
    if (stats) *stats = scheduler.stats();
    for (auto& [id, out] : collect.outputs) {
      for (size_t k = 0; k < out.completions.size(); ++k) {
        EXPECT_EQ(collect.streamed[std::make_pair(id, static_cast<int32_t>(k))], out.completions[k].text);
      }
    }
    return collect.outputs;
  }

  GenerateRequest Request(int64_t id, const std::string& text, int32_t max_tokens,
                          float temperature = 0.0f) {
    GenerateRequest r;
    r.id = RequestId(id);
    r.prompt_tokens = tokenizer_->Encode(text, true, true);
    r.params.max_tokens = max_tokens;
    r.params.temperature = temperature;
    r.params.seed = 1234 + id;
    r.params.ignore_eos = true;
    return r;
  }

  std::vector<GenerateRequest> Mixed(float temperature) {
    const char* texts[] = {
        "The capital of France is",
        "def add(a, b):\n",
        "Once upon a time, in a small village at the edge of a great forest, there lived a "
        "young girl who loved to read. Every morning she walked to the library and",
        "1, 2, 3,",
        "<|im_start|>user\nName three colors.<|im_end|>\n<|im_start|>assistant\n",
        "Water boils at",
    };
    std::vector<GenerateRequest> rs;
    for (int i = 0; i < 6; ++i) rs.push_back(Request(i, texts[i], 12 + 5 * i, temperature));
    return rs;
  }

};


TEST_F(SchedulerTest, BatchedEqualsAloneGreedyAndSeeded) {
  for (float temperature : {0.0f, 0.9f}) {
    auto requests = Mixed(temperature);
    SchedulerConfig small_chunks;
    small_chunks.max_num_batched_tokens = 24;  // forces chunked prefill beside decodes
    auto batched = Run(requests, 1024, small_chunks);
    ASSERT_EQ(batched.size(), requests.size());
    for (const auto& r : requests) {
      auto alone = Run({r});
      const Completion& a = alone.at(r.id.value()).completions[0];
      const Completion& b = batched.at(r.id.value()).completions[0];
      EXPECT_EQ(a.token_ids, b.token_ids) << "request " << r.id.value() << " T=" << temperature;
      EXPECT_EQ(static_cast<int32_t>(b.token_ids.size()), r.params.max_tokens);
      EXPECT_EQ(b.finish_reason, FinishReason::kLength);
    }
  }
}

TEST_F(SchedulerTest, PreemptionUnderBlockPressureKeepsOutputs) {
  auto requests = Mixed(0.8f);
  for (auto& r : requests) r.params.max_tokens = 40;
  auto roomy = Run(requests);
  SchedulerStats stats;
  auto tight = Run(requests, /*num_blocks=*/12, {}, &stats);
  EXPECT_GT(stats.num_preemptions, 0);
  for (const auto& r : requests) {
    EXPECT_EQ(roomy.at(r.id.value()).completions[0].token_ids,
              tight.at(r.id.value()).completions[0].token_ids)
        << "request " << r.id.value();
  }
}

TEST_F(SchedulerTest, ParallelSamplesForkAfterOnePrefill) {
  GenerateRequest r = Request(7, "Once upon a time, in a land far away, there was a dragon who", 16, 1.0f);
  r.params.n = 4;
  SchedulerStats stats;
  auto out = Run({r}, 1024, {}, &stats);
  const RequestOutput& o = out.at(7);
  ASSERT_EQ(o.completions.size(), 4u);
  // The prompt is prefilled once (all but its last token), then each of the 4
  // children computes the last prompt token itself.
  const int64_t prompt_len = static_cast<int64_t>(r.prompt_tokens.size());
  EXPECT_EQ(stats.num_prompt_tokens_computed, prompt_len - 1 + 4);
  std::set<std::vector<int32_t>> distinct;
  for (const auto& c : o.completions) distinct.insert(c.token_ids);
  EXPECT_GE(distinct.size(), 3u) << "samples with different streams should differ";
  // Same seed, same completions.
  auto again = Run({r});
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(again.at(7).completions[k].token_ids, o.completions[k].token_ids);
  }
}

TEST_F(SchedulerTest, SharedPrefixHitsCacheWithSameOutput) {
  std::string shared =
      "You are a careful assistant. Answer briefly and precisely, citing facts where you can, "
      "and never invent sources. Keep a neutral tone and use plain language. ";
  GenerateRequest a = Request(1, shared + "What is the boiling point of water?", 10);
  GenerateRequest b = Request(2, shared + "What is the boiling point of water?", 10);
  Harness h(model_, tokenizer_, 256);
  Scheduler& scheduler = *h.scheduler;
  Collect& collect = h.collect;
  ASSERT_TRUE(scheduler.Submit(a).ok());
  while (scheduler.HasWork()) ASSERT_TRUE(scheduler.Step().ok());
  ASSERT_TRUE(scheduler.Submit(b).ok());
  while (scheduler.HasWork()) ASSERT_TRUE(scheduler.Step().ok());
  EXPECT_EQ(collect.outputs.at(1).prefix_hit_tokens, 0);
  const int64_t full_blocks = (static_cast<int64_t>(b.prompt_tokens.size()) - 1) / 16 * 16;
  EXPECT_EQ(collect.outputs.at(2).prefix_hit_tokens, full_blocks);
  EXPECT_GT(full_blocks, 0);
  EXPECT_EQ(collect.outputs.at(1).completions[0].token_ids,
            collect.outputs.at(2).completions[0].token_ids);
}

TEST_F(SchedulerTest, CancelFreesBlocksAndFinishes) {
  Harness h(model_, tokenizer_, 256);
  Scheduler& scheduler = *h.scheduler;
  Collect& collect = h.collect;
  GenerateRequest r = Request(3, "Count to one hundred:", 200);
  r.params.n = 2;
  ASSERT_TRUE(scheduler.Submit(r).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(scheduler.Step().ok());
  EXPECT_GT(scheduler.kv_stats().num_blocks_used, 0);
  scheduler.Cancel(RequestId(3));
  for (int i = 0; i < 3 && scheduler.HasWork(); ++i) ASSERT_TRUE(scheduler.Step().ok());
  EXPECT_FALSE(scheduler.HasWork());
  ASSERT_TRUE(collect.outputs.contains(3));
  for (const auto& c : collect.outputs.at(3).completions) {
    EXPECT_EQ(c.finish_reason, FinishReason::kCancelled);
    EXPECT_LT(c.token_ids.size(), 200u);
  }
  EXPECT_EQ(scheduler.kv_stats().num_blocks_used, 0);
}

TEST_F(SchedulerTest, StopStringAndStopToken) {
  GenerateRequest r = Request(4, "1, 2, 3, 4, 5,", 30);
  r.params.stop = {" 8"};
  auto out = Run({r});
  const Completion& c = out.at(4).completions[0];
  EXPECT_EQ(c.finish_reason, FinishReason::kStop);
  EXPECT_EQ(c.text.find(" 8"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("7"), std::string::npos) << c.text;

  GenerateRequest s = Request(5, "1, 2, 3, 4, 5,", 30);
  auto comma = tokenizer_->Encode(",", false, false);
  ASSERT_EQ(comma.size(), 1u);
  s.params.stop_token_ids = {comma[0]};
  auto out2 = Run({s});
  const Completion& c2 = out2.at(5).completions[0];
  EXPECT_EQ(c2.finish_reason, FinishReason::kStop);
  EXPECT_EQ(c2.token_ids.back(), comma[0]);
}

TEST_F(SchedulerTest, RejectsBadRequestsWithClearErrors) {
  Harness h(model_, tokenizer_, 4);
  Scheduler& scheduler = *h.scheduler;
  auto expect_error = [&](GenerateRequest r, absl::StatusCode code, const std::string& needle) {
    absl::Status s = scheduler.Submit(std::move(r));
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  GenerateRequest empty = Request(1, "", 4);
  empty.prompt_tokens.clear();
  expect_error(empty, absl::StatusCode::kInvalidArgument, "empty");
  GenerateRequest bad_id = Request(2, "hi", 4);
  bad_id.prompt_tokens.push_back(50000);
  expect_error(bad_id, absl::StatusCode::kInvalidArgument, "49152");
  GenerateRequest too_long = Request(3, "hi", 4);
  too_long.prompt_tokens.assign(8192, 42);
  expect_error(too_long, absl::StatusCode::kInvalidArgument, "8192");
  GenerateRequest cold = Request(4, "hi", 4);
  cold.params.temperature = -1;
  expect_error(cold, absl::StatusCode::kInvalidArgument, "temperature");
  GenerateRequest no_n = Request(5, "hi", 4);
  no_n.params.n = 0;
  expect_error(no_n, absl::StatusCode::kInvalidArgument, "n");
  GenerateRequest big = Request(6, "hi", 4);
  big.prompt_tokens.assign(100, 42);  // needs 7 blocks, the cache has 4
  expect_error(big, absl::StatusCode::kResourceExhausted, "4 blocks");
  EXPECT_FALSE(scheduler.HasWork());
  EXPECT_TRUE(h.collect.outputs.empty());
}

}  // namespace
}  // namespace tandem::coordinator
