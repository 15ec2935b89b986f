// tandem-engine-bench: the engine's raw speed on one model, shaped like
// llama.cpp's llama-bench (pp = prefill of one prompt in one forward) and
// llama-batched-bench (B sequences with a PP-token prompt each, then TG decode
// steps of B tokens): prefill tokens/s, single-stream decode tokens/s, and
// aggregate decode tokens/s at several batch sizes. Greedy argmax between
// steps; output is one JSON object on stdout.
//
// Thread model: the main thread drives; the model's pool runs each forward.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/flags/flag_help.h"
#include "common/logging.h"
#include "engine/kv/kv_manager.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "", "GGUF model path");
ABSL_FLAG(int32_t, prefill_len, 512, "Prompt length for the prefill measurement");
ABSL_FLAG(int32_t, prompt_len, 128, "Prompt length per sequence for the decode measurements");
ABSL_FLAG(int32_t, decode_len, 128, "Decode steps per batch size");
ABSL_FLAG(std::string, batch_sizes, "1,16,64", "Comma-separated decode batch sizes");
ABSL_FLAG(int32_t, repetitions, 3, "Repetitions; the best is reported");
ABSL_FLAG(int32_t, threads, 0, "Threads (0 = every core)");
ABSL_FLAG(std::string, precision, "fast", "fast or reference");

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class Bench {
 public:
  explicit Bench(model::Model* model) : model_(model) {}

  // Fresh cache big enough for `tokens` tokens.
  void Reset(int64_t tokens) {
    const int32_t block_size = 16;
    int32_t blocks = static_cast<int32_t>(tokens / block_size + 64);
    kv::KvStorageConfig sc;
    sc.num_layers = model_->config().num_layers;
    sc.num_blocks = blocks;
    sc.block_size = block_size;
    sc.num_kv_heads = model_->config().num_kv_heads;
    sc.head_dim = model_->config().head_dim;
    sc.dtype = model_->kv_dtype();
    auto storage = kv::KvStorage::Create(sc);
    CHECK(storage.ok(), "%s", storage.status().ToString());
    storage_ = *std::move(storage);
    manager_ = std::make_unique<kv::KvManager>(kv::KvManagerConfig{blocks, block_size, false});
  }

  // One forward over `tokens[i]` appended to sequence i; returns argmaxes.
  std::vector<int32_t> Forward(const std::vector<std::vector<int32_t>>& tokens) {
    std::vector<model::ForwardSequence> batch(tokens.size());
    std::vector<std::vector<BlockId>> tables(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      SeqId id(static_cast<int64_t>(i));
      if (!manager_->Contains(id)) manager_->AddSequence(id, {});
      int32_t start = manager_->NumTokens(id);
      CHECK(manager_->AppendTokens(id, tokens[i]).has_value());
      auto t = manager_->BlockTable(id);
      tables[i].assign(t.begin(), t.end());
      batch[i] = {tokens[i], start, tables[i], 1};
    }
    const int32_t vocab = model_->config().vocab_size;
    logits_.resize(tokens.size() * vocab);
    absl::Status s = model_->Forward(batch, *storage_, logits_.data());
    CHECK(s.ok(), "%s", s.ToString());
    std::vector<int32_t> next(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      const float* row = logits_.data() + i * vocab;
      next[i] = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    }
    return next;
  }

 private:
  model::Model* model_;
  std::unique_ptr<kv::KvStorage> storage_;
  std::unique_ptr<kv::KvManager> manager_;
  std::vector<float> logits_;
};

std::vector<int32_t> Prompt(int32_t len, int32_t salt, int32_t vocab) {
  std::vector<int32_t> p(len);
  uint64_t x = 0x9e3779b97f4a7c15ull * (salt + 1);
  for (int32_t i = 0; i < len; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<int32_t>(100 + x % (vocab - 200));
  }
  return p;
}

int Main() {
  model::ModelOptions options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  options.precision = absl::GetFlag(FLAGS_precision) == "reference" ? model::Precision::kReference
                                                                    : model::Precision::kFast;
  auto loaded = model::Model::Load(absl::GetFlag(FLAGS_model), options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tandem-engine-bench: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  model::Model* model = loaded->get();
  const int32_t vocab = model->config().vocab_size;
  const int reps = std::max(1, absl::GetFlag(FLAGS_repetitions));
  Bench bench(model);
  nlohmann::json result;
  result["threads"] = model->pool()->num_threads();
  result["precision"] = absl::GetFlag(FLAGS_precision);
  result["isa"] = kernels::IsaName(kernels::BestIsa());

  const int32_t pp = absl::GetFlag(FLAGS_prefill_len);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    bench.Reset(pp);
    auto start = Clock::now();
    bench.Forward({Prompt(pp, r, vocab)});
    best = std::min(best, Seconds(start));
  }
  result["prefill"] = {{"tokens", pp}, {"tokens_per_s", pp / best}};
  std::fprintf(stderr, "prefill %d tokens: %.1f tokens/s\n", pp, pp / best);

  const int32_t prompt_len = absl::GetFlag(FLAGS_prompt_len);
  const int32_t decode_len = absl::GetFlag(FLAGS_decode_len);
  nlohmann::json decode = nlohmann::json::array();
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_batch_sizes), ',')) {
    int32_t b = 0;
    if (!absl::SimpleAtoi(part, &b) || b < 1) continue;
    double best_decode = 1e30;
    for (int r = 0; r < reps; ++r) {
      bench.Reset(static_cast<int64_t>(b) * (prompt_len + decode_len));
      std::vector<std::vector<int32_t>> prompts;
      for (int32_t i = 0; i < b; ++i) prompts.push_back(Prompt(prompt_len, 1000 + i, vocab));
      std::vector<int32_t> next = bench.Forward(prompts);
      auto start = Clock::now();
      for (int32_t step = 0; step < decode_len; ++step) {
        std::vector<std::vector<int32_t>> tokens(b);
        for (int32_t i = 0; i < b; ++i) tokens[i] = {next[i]};
        next = bench.Forward(tokens);
      }
      best_decode = std::min(best_decode, Seconds(start));
    }
    double tps = static_cast<double>(b) * decode_len / best_decode;
    decode.push_back({{"batch", b}, {"tokens_per_s", tps}});
    std::fprintf(stderr, "decode batch %d: %.1f tokens/s aggregate\n", b, tps);
  }
  result["decode"] = decode;
  std::printf("%s\n", result.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  const tandem::Program program{
      "tandem-engine-bench",
      {{"", "--model PATH [flags]",
        "The engine's raw prefill and decode speed on one model (JSON on stdout)",
        tandem::FlagsDefinedIn(__FILE__)}}};
  tandem::ParseCommandLineOrExit(program, argc, argv);
  return tandem::Main();
}
