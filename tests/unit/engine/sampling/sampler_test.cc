#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "common/thread_pool.h"
#include "gtest/gtest.h"

namespace tandem::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> RandomLogits(int32_t vocab, uint32_t seed, float scale = 2.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(gen);
  return logits;
}

SampleResult SampleOne(Sampler& sampler, const SamplingRow& row) {
  SampleResult result;
  sampler.SampleBatch(std::span<const SamplingRow>(&row, 1), std::span<SampleResult>(&result, 1),
                      nullptr);
  return result;
}

TEST(SamplerTest, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler sampler(6);
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f};
  SamplingParams params;
  params.temperature = 0.0f;
  params.top_k = 1;  // irrelevant to greedy
  SamplingRow row{.logits = logits.data(), .params = &params};
  EXPECT_EQ(SampleOne(sampler, row).token, 1);
  params.temperature = 1e-7f;  // below kGreedyTemperature: greedy too
  EXPECT_EQ(SampleOne(sampler, row).token, 1);
}

TEST(SamplerTest, GreedyOnLargeRandomRows) {
  const int32_t vocab = 32000;
  Sampler sampler(vocab);
  SamplingParams params;
  params.temperature = 0.0f;
  for (uint32_t s = 0; s < 5; ++s) {
    const std::vector<float> logits = RandomLogits(vocab, s);
    SamplingRow row{.logits = logits.data(), .params = &params};
    const int32_t expected =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(SampleOne(sampler, row).token, expected);
  }
}

TEST(SamplerTest, RawLogitsAreNotModified) {
  Sampler sampler(100);
  const std::vector<float> logits = RandomLogits(100, 3);
  const std::vector<float> copy = logits;
  SamplingParams params;
  params.temperature = 0.5f;
  params.repetition_penalty = 1.5f;
  params.top_k = 10;
  const std::vector<int32_t> prompt = {1, 2, 3};
  SamplingRow row{.logits = logits.data(), .params = &params, .prompt_tokens = prompt};
  SampleOne(sampler, row);
  EXPECT_EQ(logits, copy);
}

// Builds a varied batch: different params, histories, seeds; row 0 is `probe`.
struct Batch {
  std::vector<std::vector<float>> logits;
  std::vector<SamplingParams> params;
  std::vector<std::vector<int32_t>> outputs;
  std::vector<SamplingRow> rows;
};

Batch MakeBatch(int32_t vocab, int num_rows) {
  Batch b;
  b.logits.resize(num_rows);
  b.params.resize(num_rows);
  b.outputs.resize(num_rows);
  for (int i = 0; i < num_rows; ++i) {
    b.logits[i] = RandomLogits(vocab, 100 + i, 1.0f + 0.1f * (i % 7));
    SamplingParams& p = b.params[i];
    p.temperature = 0.3f + 0.2f * static_cast<float>(i % 5);
    p.top_k = (i % 3 == 0) ? 0 : 5 + i;
    p.top_p = (i % 4 == 0) ? 1.0f : 0.9f;
    p.min_p = (i % 5 == 0) ? 0.05f : 0.0f;
    p.repetition_penalty = (i % 2 == 0) ? 1.2f : 1.0f;
    p.presence_penalty = 0.1f * static_cast<float>(i % 3);
    p.logprobs = i % 6;
    for (int t = 0; t < i % 9; ++t) b.outputs[i].push_back((i * 31 + t * 17) % vocab);
  }
  for (int i = 0; i < num_rows; ++i) {
    b.rows.push_back(SamplingRow{.logits = b.logits[i].data(),
                                 .params = &b.params[i],
                                 .output_tokens = b.outputs[i],
                                 .seed = 1000u + static_cast<uint64_t>(i),
                                 .stream = static_cast<uint64_t>(i % 2)});
  }
  return b;
}

void ExpectSameResult(const SampleResult& a, const SampleResult& b) {
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.logprob, b.logprob);
  ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size());
  for (size_t i = 0; i < a.top_logprobs.size(); ++i) {
    EXPECT_EQ(a.top_logprobs[i].token, b.top_logprobs[i].token);
    EXPECT_EQ(a.top_logprobs[i].logprob, b.top_logprobs[i].logprob);
  }
}

TEST(SamplerTest, RowResultIndependentOfBatchAndPool) {
  const int32_t vocab = 2000;
  const int kRows = 40;
  Batch batch = MakeBatch(vocab, kRows);

  Sampler alone_sampler(vocab);
  std::vector<SampleResult> alone(kRows);
  for (int i = 0; i < kRows; ++i) alone[i] = SampleOne(alone_sampler, batch.rows[i]);

  Sampler batch_sampler(vocab);
  std::vector<SampleResult> together(kRows);
  batch_sampler.SampleBatch(batch.rows, together, nullptr);
  ThreadPool pool(2);
  std::vector<SampleResult> pooled(kRows);
  batch_sampler.SampleBatch(batch.rows, pooled, &pool);
  // Reversed order in the batch: each row still gets its own result.
  std::vector<SamplingRow> reversed(batch.rows.rbegin(), batch.rows.rend());
  std::vector<SampleResult> rev(kRows);
  batch_sampler.SampleBatch(reversed, rev, &pool);

  std::set<int32_t> distinct;
  for (int i = 0; i < kRows; ++i) {
    SCOPED_TRACE(i);
    ExpectSameResult(alone[i], together[i]);
    ExpectSameResult(alone[i], pooled[i]);
    ExpectSameResult(alone[i], rev[kRows - 1 - i]);
    EXPECT_EQ(alone[i].top_logprobs.size(), static_cast<size_t>(batch.params[i].logprobs));
    distinct.insert(alone[i].token);
  }
  EXPECT_GT(distinct.size(), 10u);  // the rows really differ
}

TEST(SamplerTest, SeededRunsRepeatAndSeedsMatter) {
  const int32_t vocab = 500;
  Sampler sampler(vocab);
  SamplingParams params;
  params.temperature = 1.0f;
  const std::vector<float> logits = RandomLogits(vocab, 9, 0.5f);  // flat: many plausible tokens
  auto run = [&](uint64_t seed, uint64_t stream) {
    std::vector<int32_t> out;
    for (int step = 0; step < 64; ++step) {
      SamplingRow row{.logits = logits.data(), .params = &params, .output_tokens = out,
                      .seed = seed, .stream = stream};
      out.push_back(SampleOne(sampler, row).token);
    }
    return out;
  };
  const std::vector<int32_t> a = run(77, 0);
  EXPECT_EQ(a, run(77, 0));
  EXPECT_NE(a, run(78, 0));
  EXPECT_NE(a, run(77, 1));
  // Recompute after preemption: resuming from a prefix of the history
  // reproduces the same continuation.
  std::vector<int32_t> resumed(a.begin(), a.begin() + 30);
  SamplingRow row{.logits = logits.data(), .params = &params, .output_tokens = resumed,
                  .seed = 77};
  EXPECT_EQ(SampleOne(sampler, row).token, a[30]);
}

TEST(SamplerTest, PenaltiesChangeTheGreedyChoice) {
  Sampler sampler(4);
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, -1.0f};
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 2.0f;  // 3 → 1.5 < 2
  const std::vector<int32_t> prompt = {0};
  SamplingRow row{.logits = logits.data(), .params = &params, .prompt_tokens = prompt};
  EXPECT_EQ(SampleOne(sampler, row).token, 1);

  params.repetition_penalty = 1.0f;
  params.frequency_penalty = 0.6f;  // token 0 twice: 3 - 1.2 = 1.8 < 2; token 1 once: 2 - 0.6
  const std::vector<int32_t> output = {0, 1, 0};
  row = SamplingRow{.logits = logits.data(), .params = &params, .output_tokens = output};
  EXPECT_EQ(SampleOne(sampler, row).token, 0);  // 1.8 vs 1.4 vs 1.0
  params.presence_penalty = 0.5f;  // 1.3 vs 0.9 vs 1.0 → still 0
  EXPECT_EQ(SampleOne(sampler, row).token, 0);
  params.frequency_penalty = 1.0f;  // 0.5 vs 0.5 vs 1.0 → 2
  EXPECT_EQ(SampleOne(sampler, row).token, 2);
}

TEST(SamplerTest, MinTokensMasksEosAndStopIds) {
  Sampler sampler(5);
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 5.0f, 4.0f};  // 3 = EOS, 4 = stop id
  SamplingParams params;
  params.temperature = 0.0f;
  params.min_tokens = 2;
  params.stop_token_ids = {4};
  const std::vector<int32_t> eos = {3};
  std::vector<int32_t> output = {0};
  SamplingRow row{.logits = logits.data(), .params = &params, .output_tokens = output,
                  .eos_token_ids = eos};
  EXPECT_EQ(SampleOne(sampler, row).token, 2);
  params.ignore_eos = true;  // EOS is not masked (it just will not stop)
  EXPECT_EQ(SampleOne(sampler, row).token, 3);
  params.ignore_eos = false;
  output.push_back(1);  // min_tokens reached
  row.output_tokens = output;
  EXPECT_EQ(SampleOne(sampler, row).token, 3);

  // Random sampling never draws a masked id while below min_tokens.
  params.temperature = 1.0f;
  params.min_tokens = 100;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    row.seed = seed;
    const int32_t t = SampleOne(sampler, row).token;
    ASSERT_NE(t, 3);
    ASSERT_NE(t, 4);
  }
}

TEST(SamplerTest, FallsBackToRawArgmaxWhenEverythingIsMasked) {
  Sampler sampler(2);
  const std::vector<float> logits = {1.0f, 2.0f};
  SamplingParams params;
  params.min_tokens = 5;
  params.stop_token_ids = {0};
  const std::vector<int32_t> eos = {1};
  SamplingRow row{.logits = logits.data(), .params = &params, .eos_token_ids = eos};
  EXPECT_EQ(SampleOne(sampler, row).token, 1);
}

// log_softmax computed directly, in long double.
std::vector<double> LogSoftmax(const std::vector<float>& x) {
  long double m = *std::max_element(x.begin(), x.end());
  long double s = 0;
  for (float v : x) s += std::exp(static_cast<long double>(v) - m);
  std::vector<double> out;
  for (float v : x) out.push_back(static_cast<double>(v - m - std::log(s)));
  return out;
}

TEST(SamplerTest, LogprobsAreRawLogSoftmax) {
  const int32_t vocab = 1000;
  Sampler sampler(vocab);
  const std::vector<float> logits = RandomLogits(vocab, 21, 3.0f);
  const std::vector<double> expected = LogSoftmax(logits);
  std::vector<int32_t> order(vocab);
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });

  SamplingParams params;
  params.temperature = 0.7f;  // processing must not leak into the logprobs
  params.top_k = 3;
  params.repetition_penalty = 1.3f;
  params.logprobs = 5;
  const std::vector<int32_t> prompt = {order[0], 4, 5};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SamplingRow row{.logits = logits.data(), .params = &params, .prompt_tokens = prompt,
                    .seed = seed};
    const SampleResult r = SampleOne(sampler, row);
    EXPECT_NEAR(r.logprob, expected[r.token], 1e-5);
    ASSERT_EQ(r.top_logprobs.size(), 5u);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(r.top_logprobs[i].token, order[i]);
      EXPECT_NEAR(r.top_logprobs[i].logprob, expected[order[i]], 1e-5);
    }
  }
  params.logprobs = 0;
  SamplingRow row{.logits = logits.data(), .params = &params};
  EXPECT_TRUE(SampleOne(sampler, row).top_logprobs.empty());
}

TEST(SamplerTest, TopLogprobsTiesOrderedById) {
  Sampler sampler(5);
  const std::vector<float> logits = {1.0f, 2.0f, 1.0f, 2.0f, -kInf};
  SamplingParams params;
  params.temperature = 0.0f;
  params.logprobs = 5;
  SamplingRow row{.logits = logits.data(), .params = &params};
  const SampleResult r = SampleOne(sampler, row);
  ASSERT_EQ(r.top_logprobs.size(), 5u);
  EXPECT_EQ(r.top_logprobs[0].token, 1);
  EXPECT_EQ(r.top_logprobs[1].token, 3);
  EXPECT_EQ(r.top_logprobs[2].token, 0);
  EXPECT_EQ(r.top_logprobs[3].token, 2);
  EXPECT_EQ(r.top_logprobs[4].token, 4);
  EXPECT_EQ(r.top_logprobs[4].logprob, -kInf);
  const double lse = 2.0 + std::log(2.0 + 2.0 * std::exp(-1.0));
  EXPECT_NEAR(r.logprob, 2.0 - lse, 1e-6);
}

}  // namespace
}  // namespace tandem::sampling
