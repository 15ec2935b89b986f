// The model against llama.cpp (greedy continuations and first-position
// logprobs, expected files from tests/reference/model/make_expected.py), and
// the paged KV cache's prefix reuse and forks against from-scratch compute.
#include "engine/model/model.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "engine/kv/kv_manager.h"
#include "engine/kv/kv_storage.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::model {
namespace {

// Runs sequences over one KvManager + KvStorage, one forward per call.
class Engine {
 public:
  explicit Engine(Precision precision, int32_t num_blocks = 512) {
    ModelOptions options;
    options.precision = precision;
    auto m = Model::Load(testing::DefaultModelPath(), options);
    CHECK(m.ok(), "%s", m.status().ToString());
    model_ = *std::move(m);
    kv::KvStorageConfig sc;
    sc.num_layers = model_->config().num_layers;
    sc.num_blocks = num_blocks;
    sc.block_size = 16;
    sc.num_kv_heads = model_->config().num_kv_heads;
    sc.head_dim = model_->config().head_dim;
    sc.dtype = model_->kv_dtype();
    storage_ = *kv::KvStorage::Create(sc);
    manager_ = std::make_unique<kv::KvManager>(kv::KvManagerConfig{num_blocks, 16, true});
  }

  Model& model() { return *model_; }
  kv::KvManager& manager() { return *manager_; }
  int32_t vocab() const { return model_->config().vocab_size; }

  // Appends `tokens[i]` to sequence `ids[i]` (computing their K/V in one
  // batched forward) and returns each sequence's last-position logits.
  std::vector<std::vector<float>> Step(const std::vector<SeqId>& ids,
                                       const std::vector<std::vector<int32_t>>& tokens) {
    std::vector<ForwardSequence> batch;
    std::vector<std::vector<BlockId>> tables(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      int32_t start = manager_->NumTokens(ids[i]);
      auto copies = manager_->AppendTokens(ids[i], tokens[i]);
      CHECK(copies.has_value());
      storage_->CopyBlocks(*copies);
      auto table = manager_->BlockTable(ids[i]);
      tables[i].assign(table.begin(), table.end());
      ForwardSequence f;
      f.tokens = tokens[i];
      f.start_pos = start;
      f.block_table = tables[i];
      f.num_logits = 1;
      batch.push_back(f);
    }
    std::vector<float> logits(ids.size() * vocab());
    absl::Status s = model_->Forward(batch, *storage_, logits.data());
    CHECK(s.ok(), "%s", s.ToString());
    std::vector<std::vector<float>> out(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      out[i].assign(logits.begin() + i * vocab(), logits.begin() + (i + 1) * vocab());
    }
    return out;
  }

  // Adds a sequence; returns the prefix-cache hit length. The caller then
  // computes prompt[hit:] with Step.
  int32_t Add(SeqId id, const std::vector<int32_t>& prompt) {
    return manager_->AddSequence(id, prompt);
  }

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<kv::KvStorage> storage_;
  std::unique_ptr<kv::KvManager> manager_;
};

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<double> LogSoftmax(const std::vector<float>& v) {
  double m = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (float x : v) sum += std::exp(x - m);
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] - m - std::log(sum);
  return out;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Greedy continuations of every reference prompt, all decoded together in one
// batch (prompts of different lengths prefilled in one forward, then one
// decode token per sequence per step), compared with llama.cpp.
// `near_tie`: the largest llama.cpp top-2 logit margin at which a flipped
// token is accepted. The quantized paths move logits by up to ~1 from exact
// math (ReferencePrecisionCloseToFast), so llama.cpp's and ours can disagree
// on any pair closer than that; measured flips happen at margins 0.01-0.58.
void CheckGreedyAgainstLlamaCpp(Precision precision, float near_tie) {
  std::vector<nlohmann::json> expected = testing::ReadReferenceJsonl("model/expected_greedy.jsonl");
  ASSERT_GE(expected.size(), 8u);
  Engine engine(precision);
  std::vector<SeqId> ids;
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < expected.size(); ++i) {
    ids.push_back(SeqId(static_cast<int64_t>(i)));
    prompts.push_back(expected[i]["prompt_ids"].get<std::vector<int32_t>>());
    engine.Add(ids.back(), {});
  }
  std::vector<std::vector<float>> logits = engine.Step(ids, prompts);
  // Top-5 logprobs of the first generated position.
  double max_diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    std::vector<double> lp = LogSoftmax(logits[i]);
    for (const auto& pair : expected[i]["first_top5"]) {
      int32_t token = pair[0].get<int32_t>();
      double want = pair[1].get<double>();
      // Tolerance 0.4: both engines quantize every activation to 8 bits per
      // block of 32 before each matmul and keep K/V in f16. Our reference
      // mode equals exact float64 math to 2e-3 (ReferencePrecisionMatches-
      // NumpyFloat64), and the quantized path alone moves this model's
      // logprobs by up to ~0.35 from exact (ReferencePrecisionCloseToFast);
      // llama.cpp's quantized path carries the same size of error, rounded
      // differently (its RMSNorm sums in double, its attention converts Q to
      // f16), so the two differ by about the sum: measured max 0.21-0.31
      // over the reference, AVX2 and AVX-512 kernels.
      EXPECT_NEAR(lp[token], want, 0.4) << "prompt " << i << " token " << token;
      max_diff = std::max(max_diff, std::fabs(lp[token] - want));
    }
  }
  std::printf("first-position top-5 logprobs: max |ours - llama.cpp| = %.3f\n", max_diff);
  const size_t num_new = expected[0]["greedy_ids"].size();
  std::vector<std::vector<int32_t>> generated(expected.size());
  std::vector<bool> diverged(expected.size(), false);
  for (size_t step = 0; step < num_new; ++step) {
    std::vector<std::vector<int32_t>> next(expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      int32_t ours = Argmax(logits[i]);
      int32_t theirs = expected[i]["greedy_ids"][step].get<int32_t>();
      if (!diverged[i] && ours != theirs) {
        const auto& top2 = expected[i]["top2_logits"][step];
        float margin = top2[0][1].get<float>() - top2[1][1].get<float>();
        // A flip is acceptable only where llama.cpp itself saw a near-tie.
        EXPECT_LT(margin, near_tie)
            << "prompt " << i << " step " << step << ": ours " << ours << " (logit "
            << logits[i][ours] << ", theirs " << logits[i][theirs] << "), llama.cpp "
            << top2.dump();
        std::printf("prompt %zu step %zu: near-tie flip, llama.cpp top-2 %s, ours %d=%.4f %d=%.4f\n",
                    i, step, top2.dump().c_str(), ours, logits[i][ours], theirs, logits[i][theirs]);
        diverged[i] = true;
      }
      // Keep following llama.cpp's tokens so later positions stay comparable.
      next[i] = {diverged[i] ? ours : theirs};
      generated[i].push_back(next[i][0]);
    }
    if (step + 1 < num_new) logits = engine.Step(ids, next);
  }
  int matched = 0;
  for (size_t i = 0; i < expected.size(); ++i) matched += !diverged[i];
  std::printf("%d of %zu prompts match llama.cpp token for token over %zu tokens; the others "
              "flipped at a near-tie (above)\n",
              matched, expected.size(), num_new);
  EXPECT_GE(matched, 1);
}

TEST(ModelTest, GreedyMatchesLlamaCppFast) { CheckGreedyAgainstLlamaCpp(Precision::kFast, 0.75f); }

// Reference precision (f32 weights and math) against an independent float64
// numpy implementation of the decoder (tests/reference/model/numpy_forward.py):
// both compute the same function exactly, so only f32 rounding separates them.
TEST(ModelTest, ReferencePrecisionMatchesNumpyFloat64) {
  std::vector<nlohmann::json> expected = testing::ReadReferenceJsonl("model/expected_f32.jsonl");
  ASSERT_GE(expected.size(), 3u);
  Engine engine(Precision::kReference);
  for (size_t i = 0; i < expected.size(); ++i) {
    auto prompt = expected[i]["prompt_ids"].get<std::vector<int32_t>>();
    SeqId id(static_cast<int64_t>(i));
    engine.Add(id, {});
    std::vector<float> logits = engine.Step({id}, {prompt})[0];
    for (const auto& pair : expected[i]["top20"]) {
      // f32 accumulation over 30 layers of 576-wide dot products: a few 1e-4
      // relative on logits of magnitude ~30.
      EXPECT_NEAR(logits[pair[0].get<int32_t>()], pair[1].get<double>(), 2e-3)
          << "prompt " << i << " token " << pair[0];
    }
  }
}

TEST(ModelTest, ReferencePrecisionCloseToFast) {
  std::vector<nlohmann::json> expected = testing::ReadReferenceJsonl("model/expected_greedy.jsonl");
  Engine fast(Precision::kFast);
  Engine ref(Precision::kReference);
  for (size_t i = 0; i < 3; ++i) {
    auto prompt = expected[i]["prompt_ids"].get<std::vector<int32_t>>();
    fast.Add(SeqId(1), {});
    ref.Add(SeqId(1), {});
    auto a = fast.Step({SeqId(1)}, {prompt})[0];
    auto b = ref.Step({SeqId(1)}, {prompt})[0];
    fast.manager().Free(SeqId(1));
    ref.manager().Free(SeqId(1));
    // Fast mode quantizes activations to 8 bits per block of 32 (SmolLM2 has
    // large outlier channels, which makes that lossy) and stores K/V in f16:
    // on these prompts its logits stay within 3 of exact f32 math over the
    // whole vocabulary and the exact top-1 token's logprob within 0.45
    // (measured over the reference, AVX2 and AVX-512 kernels, whose fp32
    // rounding differs: max |logit diff| 0.76-2.2, top-1 logprob up to 0.34).
    std::vector<double> la = LogSoftmax(a), lb = LogSoftmax(b);
    std::printf("prompt %zu: fast vs reference max |logit diff| %.3f, top-1 logprob %.3f vs %.3f\n",
                i, MaxAbsDiff(a, b), la[Argmax(b)], lb[Argmax(b)]);
    EXPECT_LT(MaxAbsDiff(a, b), 3.0f) << "prompt " << i;
    EXPECT_NEAR(la[Argmax(b)], lb[Argmax(b)], 0.45) << "prompt " << i;
  }
}

// A sequence whose prompt starts with cached blocks, and a forked sequence,
// give the same logits as the same tokens computed from scratch.
TEST(ModelTest, PrefixCacheAndForkMatchFromScratch) {
  std::vector<nlohmann::json> expected = testing::ReadReferenceJsonl("model/expected_greedy.jsonl");
  std::vector<int32_t> prompt = expected[8]["prompt_ids"].get<std::vector<int32_t>>();
  ASSERT_GT(prompt.size(), 100u);
  prompt.resize(70);  // 4 full blocks + 6 tokens
  Engine engine(Precision::kFast);

  // From scratch.
  engine.Add(SeqId(1), {});
  std::vector<float> scratch = engine.Step({SeqId(1)}, {prompt})[0];

  // Prefix hit: the 4 full blocks are reused, only the last 6 tokens computed.
  int32_t hit = engine.Add(SeqId(2), prompt);
  EXPECT_EQ(hit, 64);
  std::vector<int32_t> rest(prompt.begin() + hit, prompt.end());
  std::vector<float> cached = engine.Step({SeqId(2)}, {rest})[0];
  EXPECT_LT(MaxAbsDiff(scratch, cached), 1e-4f);
  EXPECT_EQ(engine.manager().stats().prefix_hit_tokens, 64);

  // Fork seq 1 (partial last block shared), then each appends a different
  // token: copy-on-write keeps them apart. Compare with from-scratch runs.
  engine.manager().Fork(SeqId(1), SeqId(3));
  int32_t ta = 1000, tb = 2000;
  auto forked = engine.Step({SeqId(1), SeqId(3)}, {{ta}, {tb}});
  for (auto [token, got] : {std::pair{ta, forked[0]}, std::pair{tb, forked[1]}}) {
    std::vector<int32_t> full = prompt;
    full.push_back(token);
    Engine fresh(Precision::kFast);
    fresh.Add(SeqId(9), {});
    std::vector<float> want = fresh.Step({SeqId(9)}, {full})[0];
    EXPECT_LT(MaxAbsDiff(want, got), 1e-4f) << "token " << token;
  }
  EXPECT_TRUE(engine.manager().CheckInvariants().ok());
}

// A sequence's logits do not depend on what else is in the batch.
TEST(ModelTest, BatchCompositionDoesNotChangeLogits) {
  std::vector<nlohmann::json> expected = testing::ReadReferenceJsonl("model/expected_greedy.jsonl");
  std::vector<int32_t> p0 = expected[0]["prompt_ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> p1 = expected[3]["prompt_ids"].get<std::vector<int32_t>>();
  Engine alone(Precision::kFast);
  alone.Add(SeqId(1), {});
  std::vector<float> a = alone.Step({SeqId(1)}, {p0})[0];
  Engine batched(Precision::kFast);
  batched.Add(SeqId(1), {});
  batched.Add(SeqId(2), {});
  std::vector<float> b = batched.Step({SeqId(2), SeqId(1)}, {p1, p0})[1];
  EXPECT_EQ(MaxAbsDiff(a, b), 0.0f);
}

TEST(ModelTest, BadBatchIsRejected) {
  Engine engine(Precision::kFast, 8);
  engine.Add(SeqId(1), {});
  std::vector<int32_t> bad = {1, 49152};
  auto copies = engine.manager().AppendTokens(SeqId(1), bad);
  ASSERT_TRUE(copies.has_value());
  auto table = engine.manager().BlockTable(SeqId(1));
  std::vector<BlockId> t(table.begin(), table.end());
  ForwardSequence f{bad, 0, t, 1};
  std::vector<float> logits(engine.vocab());
  kv::KvStorageConfig sc{engine.model().config().num_layers, 8, 16,
                         engine.model().config().num_kv_heads, engine.model().config().head_dim,
                         engine.model().kv_dtype()};
  auto storage = *kv::KvStorage::Create(sc);
  absl::Status s = engine.model().Forward({&f, 1}, *storage, logits.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("49152"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tandem::model
