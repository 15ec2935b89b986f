#include "client/commands/run_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "absl/strings/str_format.h"
#include "client/json_request.h"
#include "client/result_json.h"
#include "common/status_macros.h"
#include "draft/proposer_factory.h"
#include "draft/api/speculative_spec.h"
#include "coordinator/cluster/draft_pool_set.h"
#include "coordinator/cluster/local_draft_pool.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/scheduler/scheduler.h"
#include "engine/model/kv_budget.h"
#include "engine/kv/kv_storage.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/vocab.h"
#include "nlohmann/json.hpp"

namespace tandem::client {
namespace {

using coordinator::CompletionDelta;
using coordinator::RequestOutput;
using nlohmann::json;

// Prints streamed text (single request, n = 1) or collects outputs for JSON.
class CliObserver : public coordinator::RequestObserver {
 public:
  explicit CliObserver(bool stream_text) : stream_text_(stream_text) {}
  void OnDelta(const CompletionDelta& delta) override {
    if (stream_text_ && !delta.text.empty()) {
      std::fwrite(delta.text.data(), 1, delta.text.size(), stdout);
      std::fflush(stdout);
    }
  }
  void OnFinished(const RequestOutput& output) override { outputs_[output.id.value()] = output; }
  std::map<int64_t, RequestOutput>& outputs() { return outputs_; }

 private:
  bool stream_text_;
  std::map<int64_t, RequestOutput> outputs_;
};

// Turns one request's prompt (text, chat or ids) into token ids.
absl::StatusOr<std::vector<int32_t>> PromptTokens(const tokenizer::Tokenizer& tok,
                                                  const tokenizer::Vocab& vocab,
                                                  const JsonRequest& r) {
  if (r.prompt_token_ids) return *r.prompt_token_ids;
  if (r.prompt) return tok.Encode(*r.prompt, /*add_special=*/true, /*parse_special=*/true);
  ASSIGN_OR_RETURN(std::string text,
                   tokenizer::ApplyChatTemplate(r.messages, /*add_generation_prompt=*/true,
                                                vocab.chat_template));
  return tok.Encode(text, /*add_special=*/true, /*parse_special=*/true);
}

}  // namespace

int RunCommand(const RunOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "tandem run: %s\n", s.ToString().c_str());
    return 1;
  };
  int sources = o.prompt.has_value() + o.chat.has_value() + o.prompt_ids.has_value() +
                o.requests_file.has_value();
  if (sources != 1) {
    return fail(absl::InvalidArgumentError(
        "give exactly one of --prompt, --chat, --prompt-ids or --requests"));
  }
  // Read the request lines first so a missing file fails before the model loads.
  std::vector<std::string> lines;
  if (o.requests_file) {
    std::ifstream in(*o.requests_file);
    if (!in) {
      return fail(absl::NotFoundError(
          absl::StrFormat("cannot open requests file '%s'", *o.requests_file)));
    }
    for (std::string line; std::getline(in, line);) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
    }
  }

  model::ModelOptions model_options;
  model_options.precision = o.precision;
  model_options.num_threads = o.num_threads;
  absl::StatusOr<std::unique_ptr<model::Model>> model = model::Model::Load(o.model_path, model_options);
  if (!model.ok()) return fail(model.status());
  absl::StatusOr<tokenizer::Vocab> vocab = tokenizer::LoadVocabFromGguf((*model)->file());
  if (!vocab.ok()) return fail(vocab.status());
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::Create(*vocab);
  if (!tok.ok()) return fail(tok.status());

  if (o.block_size < 1 || o.block_size > 1024) {
    return fail(absl::InvalidArgumentError(absl::StrFormat(
        "--block-size %d is out of range: must be in [1, 1024]", o.block_size)));
  }
  worker::StepExecutorConfig exec_config;
  exec_config.block_size = o.block_size;
  exec_config.eos_token_ids = (*tok)->EndOfGenerationIds();
  absl::StatusOr<int32_t> num_blocks =
      model::NumKvBlocks(**model, o.block_size, o.kv_blocks, o.kv_cache_bytes);
  if (!num_blocks.ok()) return fail(num_blocks.status());
  exec_config.num_blocks = *num_blocks;
  absl::StatusOr<std::unique_ptr<coordinator::LocalWorkerGroup>> group =
      coordinator::LocalWorkerGroup::Create(model->get(), exec_config);
  if (!group.ok()) return fail(group.status());

  coordinator::SchedulerConfig sched_config;
  sched_config.max_num_batched_tokens = o.max_num_batched_tokens;
  sched_config.max_num_seqs = o.max_num_seqs;
  sched_config.enable_prefix_cache = o.enable_prefix_cache;
  if (absl::Status s = coordinator::ValidateSchedulerConfig(sched_config); !s.ok()) return fail(s);
  // Beam search streams whole best-beam texts that replace each other:
  // printed once done instead.
  // The in-process draft of --speculative (its K/V budget beside the target's).
  std::unique_ptr<coordinator::DraftPool> deployment_draft;
  if (!o.speculative.empty()) {
    absl::StatusOr<draft::SpeculativeSpec> spec = draft::ParseSpeculativeSpec(o.speculative);
    if (!spec.ok()) return fail(spec.status());
    draft::ProposerOptions po;
    po.spec = *spec;
    po.target_model_path = o.model_path;
    po.model_options.precision = o.precision;
    po.model_options.num_threads = o.num_threads;
    po.block_size = o.block_size;
    po.eos_token_ids = (*tok)->EndOfGenerationIds();
    absl::StatusOr<std::unique_ptr<draft::Proposer>> proposer = draft::MakeProposer(po);
    if (!proposer.ok()) return fail(proposer.status());
    deployment_draft = std::make_unique<coordinator::LocalDraftPool>(*std::move(proposer));
  }
  // Requests naming "draft": "ngram" speculate with an in-process n-gram
  // draft whatever --speculative says.
  coordinator::DraftPoolSet draft_pool(
      std::move(deployment_draft),
      coordinator::NgramDraftPoolMaker(o.block_size, (*tok)->vocab_size(),
                                       (*tok)->EndOfGenerationIds()));
  const bool stream_text =
      !o.json && !o.requests_file && o.params.n == 1 && !BeamIfRequested(o.beam).has_value();
  CliObserver observer(stream_text);
  coordinator::Scheduler scheduler(sched_config, group->get(), tok->get(), &observer);
  {
    coordinator::SpeculationConfig spec_config;
    spec_config.num_speculative_tokens = o.num_speculative_tokens;
    scheduler.set_draft_pool(&draft_pool, spec_config);
  }

  // Build and submit every request; a rejected one gets an error line.
  std::vector<JsonRequest> requests;
  if (o.requests_file) {
    for (size_t i = 0; i < lines.size(); ++i) {
      absl::StatusOr<JsonRequest> r = ParseJsonRequest(lines[i], o.params, o.beam);
      if (!r.ok()) {
        return fail(absl::InvalidArgumentError(
            absl::StrFormat("request line %d: %s", i + 1, r.status().message())));
      }
      requests.push_back(*std::move(r));
    }
  } else {
    requests.push_back(RequestFromFlags(o.prompt, o.prompt_ids, o.chat, o.params, o.beam));
  }
  std::map<int64_t, std::string> rejected;
  for (size_t i = 0; i < requests.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> ids = PromptTokens(**tok, *vocab, requests[i]);
    coordinator::GenerateRequest g;
    g.id = RequestId(static_cast<int64_t>(i));
    g.params = requests[i].params;
    g.priority = requests[i].priority;
    g.beam = requests[i].beam;
    g.num_speculative_tokens = requests[i].num_speculative_tokens;
    g.draft = requests[i].draft;
    absl::Status status = ids.status();
    if (ids.ok()) {
      g.prompt_tokens = *std::move(ids);
      status = scheduler.Submit(std::move(g));
    }
    if (!status.ok()) {
      if (requests.size() == 1) return fail(status);
      rejected[static_cast<int64_t>(i)] = std::string(status.message());
    }
  }

  auto start = std::chrono::steady_clock::now();
  while (scheduler.HasWork()) {
    absl::StatusOr<bool> stepped = scheduler.Step();
    if (!stepped.ok()) return fail(stepped.status());
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int exit_code = rejected.empty() ? 0 : 1;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto rej = rejected.find(static_cast<int64_t>(i));
    if (rej != rejected.end()) {
      std::printf("%s\n", json({{"error", rej->second}}).dump().c_str());
      continue;
    }
    const RequestOutput& out = observer.outputs().at(static_cast<int64_t>(i));
    const std::string error = out.status.ok() ? "" : std::string(out.status.message());
    if (!out.status.ok()) exit_code = 1;
    const int32_t top_k = requests[i].params.logprobs;
    if (o.json && !o.requests_file && requests[i].beam.has_value()) {
      std::printf("%s\n", RequestLineJson(out.prompt_token_ids, out.completions, top_k,
                                          out.prefix_hit_tokens, error)
                              .dump()
                              .c_str());
    } else if (o.json && !o.requests_file) {
      for (const auto& c : out.completions) {
        std::printf("%s\n",
                    CompletionJson(out.prompt_token_ids, c, top_k, out.prefix_hit_tokens).dump().c_str());
      }
    } else if (o.requests_file) {
      std::printf("%s\n", RequestLineJson(out.prompt_token_ids, out.completions, top_k,
                                          out.prefix_hit_tokens, error)
                              .dump()
                              .c_str());
    } else if (stream_text) {
      std::printf("\n");
    } else {
      PrintCompletionsText(out.completions);
    }
  }
  std::fflush(stdout);
  const coordinator::SchedulerStats& st = scheduler.stats();
  kv::KvStats kvs = scheduler.kv_stats();
  std::fputs(absl::StrFormat("tandem run: %d requests, %d prompt tokens computed (%d from prefix "
                             "cache), %d tokens generated in %.3f s: %.1f tokens/s (%d steps, %d "
                             "preemptions)\n",
                             requests.size(), st.num_prompt_tokens_computed, kvs.prefix_hit_tokens,
                             st.num_generated_tokens, seconds,
                             seconds > 0 ? st.num_generated_tokens / seconds : 0.0, st.num_steps,
                             st.num_preemptions)
                 .c_str(),
             stderr);
  if (!o.speculative.empty() || st.num_speculative_rounds > 0) {
    std::fprintf(stderr,
                 "tandem run: speculative (%s): %lld rounds, %lld of %lld draft tokens accepted "
                 "(%.1f%%), %.2f tokens per round\n",
                 draft_pool.name().c_str(), static_cast<long long>(st.num_speculative_rounds),
                 static_cast<long long>(st.num_accepted_tokens),
                 static_cast<long long>(st.num_draft_tokens),
                 st.num_draft_tokens > 0 ? 100.0 * st.num_accepted_tokens / st.num_draft_tokens : 0.0,
                 st.num_speculative_rounds > 0
                     ? 1.0 + static_cast<double>(st.num_accepted_tokens) / st.num_speculative_rounds
                     : 0.0);
  }
  if (requests.size() == 1 && observer.outputs().contains(0)) {
    const RequestOutput& out = observer.outputs().at(0);
    const double decode_ms = out.latency_ms - out.time_to_first_token_ms;
    int64_t tokens = 0;
    for (const auto& c : out.completions) tokens += static_cast<int64_t>(c.token_ids.size());
    const int64_t decode_tokens = tokens - static_cast<int64_t>(out.completions.size());
    std::fprintf(stderr, "tandem run: time to first token %.1f ms, then %.1f tokens/s\n",
                 out.time_to_first_token_ms,
                 decode_ms > 0 && decode_tokens > 0 ? decode_tokens * 1000.0 / decode_ms : 0.0);
  }
  return exit_code;
}

}  // namespace tandem::client
