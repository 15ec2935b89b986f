#include "client/commands/run_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "absl/strings/str_format.h"
#include "client/command_failure.h"
#include "client/json_request.h"
#include "client/result_json.h"
#include "common/status_macros.h"
#include "coordinator/cluster/draft_pool_set.h"
#include "coordinator/cluster/local_draft_pool.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/scheduler/scheduler.h"
#include "draft/proposer_factory.h"
#include "draft/api/speculative_spec.h"
#include "engine/device/model_runner_factory.h"
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
  // Control-token text inside a message stays plain text, as the
  // coordinator's default (RequestAdmission::EncodeChat).
  std::vector<tokenizer::Tokenizer::ByteRange> content;
  ASSIGN_OR_RETURN(std::string text,
                   tokenizer::ApplyChatTemplate(r.messages, /*add_generation_prompt=*/true,
                                                vocab.chat_template, &content));
  return tok.Encode(text, /*add_special=*/true, /*parse_special=*/true, content);
}

int Fail(const absl::Status& s) { return CommandFailed("run", s); }

// The non-blank lines of the --requests file at `path`; NOT_FOUND naming it
// when it cannot be opened.
absl::StatusOr<std::vector<std::string>> ReadRequestLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot open requests file '%s'", path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// The model in this process, its tokenizer and a worker group over it.
// Members are declared so that the group goes before the model it runs.
struct LocalEngine {
  std::unique_ptr<model::Model> model;
  tokenizer::Vocab vocab;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<coordinator::LocalWorkerGroup> group;
};

// Loads the model and its tokenizer and sizes the KV cache from the options
// (validated by engine::EngineOptionsFromFlags).
absl::StatusOr<LocalEngine> LoadEngine(const RunOptions& o) {
  LocalEngine engine;
  const device::DeviceChoice& device = o.engine.device;
  ASSIGN_OR_RETURN(engine.model, model::Model::Load(o.model_path, o.engine.model));
  ASSIGN_OR_RETURN(engine.vocab, tokenizer::LoadVocabFromGguf(engine.model->file()));
  ASSIGN_OR_RETURN(engine.tok, tokenizer::Tokenizer::Create(engine.vocab));
  worker::StepExecutorConfig exec_config;
  exec_config.block_size = o.engine.block_size;
  exec_config.eos_token_ids = engine.tok->EndOfGenerationIds();
  ASSIGN_OR_RETURN(device::LoadedRunner loaded,
                   device::MakeModelRunner(engine.model.get(), o.engine.Runner()));
  exec_config.num_blocks = loaded.num_blocks;
  if (device.device != device::Device::kCpu) {
    std::fprintf(stderr, "tandem run: model on %s (--cuda-weights %s), %d KV blocks of %d tokens\n",
                 loaded.runner->device_name(), device::CudaWeightsName(device.cuda.weights),
                 loaded.num_blocks, o.engine.block_size);
  }
  ASSIGN_OR_RETURN(engine.group,
                   coordinator::LocalWorkerGroup::Create(std::move(loaded.runner), exec_config));
  return engine;
}

// The scheduler's settings from the options, validated.
absl::StatusOr<coordinator::SchedulerConfig> SchedulerConfigOf(const RunOptions& o) {
  coordinator::SchedulerConfig config;
  config.max_num_batched_tokens = o.max_num_batched_tokens;
  config.max_num_seqs = o.max_num_seqs;
  config.enable_prefix_cache = o.enable_prefix_cache;
  RETURN_IF_ERROR(coordinator::ValidateSchedulerConfig(config));
  return config;
}

// The drafts: the in-process one of --speculative (its K/V budget beside the
// target's), plus n-gram drafting for requests naming "draft": "ngram"
// whatever --speculative says.
absl::StatusOr<std::unique_ptr<coordinator::DraftPoolSet>> MakeDraftPool(
    const RunOptions& o, const tokenizer::Tokenizer& tok) {
  std::unique_ptr<coordinator::DraftPool> deployment_draft;
  if (!o.speculative.empty()) {
    draft::ProposerOptions po;
    ASSIGN_OR_RETURN(po.spec, draft::ParseSpeculativeSpec(o.speculative));
    po.target_model_path = o.model_path;
    po.model_options.precision = o.engine.model.precision;
    po.model_options.num_threads = o.engine.model.num_threads;
    po.block_size = o.engine.block_size;
    po.eos_token_ids = tok.EndOfGenerationIds();
    ASSIGN_OR_RETURN(std::unique_ptr<draft::Proposer> proposer, draft::MakeProposer(po));
    deployment_draft = std::make_unique<coordinator::LocalDraftPool>(std::move(proposer));
  }
  return std::make_unique<coordinator::DraftPoolSet>(
      std::move(deployment_draft),
      coordinator::NgramDraftPoolMaker(o.engine.block_size, tok.vocab_size(), tok.EndOfGenerationIds()));
}

// Every request to run: one per line of `lines` (--requests), else the one
// the flags describe. INVALID_ARGUMENT naming the first bad line.
absl::StatusOr<std::vector<JsonRequest>> BuildRequests(const RunOptions& o,
                                                       const std::vector<std::string>& lines) {
  std::vector<JsonRequest> requests;
  if (!o.requests_file) {
    requests.push_back(RequestFromFlags(o.prompt, o.prompt_ids, o.chat, o.params, o.beam));
    return requests;
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::StatusOr<JsonRequest> r = ParseJsonRequest(lines[i], o.params, o.beam);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("request line %d: %s", i + 1, r.status().message()));
    }
    requests.push_back(*std::move(r));
  }
  return requests;
}

// Submits every request (request i gets id i). Returns the rejected ones'
// errors by id; a lone request's rejection is returned as the error itself.
absl::StatusOr<std::map<int64_t, std::string>> SubmitAll(const std::vector<JsonRequest>& requests,
                                                         const LocalEngine& engine,
                                                         coordinator::Scheduler& scheduler) {
  std::map<int64_t, std::string> rejected;
  for (size_t i = 0; i < requests.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> ids = PromptTokens(*engine.tok, engine.vocab, requests[i]);
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
      if (requests.size() == 1) return status;
      rejected[static_cast<int64_t>(i)] = std::string(status.message());
    }
  }
  return rejected;
}

// Steps `scheduler` until every request is done; returns the seconds taken.
absl::StatusOr<double> RunToCompletion(coordinator::Scheduler& scheduler) {
  auto start = std::chrono::steady_clock::now();
  while (scheduler.HasWork()) {
    absl::StatusOr<bool> stepped = scheduler.Step();
    if (!stepped.ok()) return stepped.status();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Prints one finished request: a JSON line per request (--requests, or beam
// search with --json), a JSON object per sequence (--json), the newline
// after streamed text, or the completions as text.
void PrintOutput(const RunOptions& o, const JsonRequest& request, const RequestOutput& out,
                 bool stream_text) {
  const std::string error = out.status.ok() ? "" : std::string(out.status.message());
  const int32_t top_k = request.params.logprobs;
  if (o.requests_file || (o.json && request.beam.has_value())) {
    std::printf("%s\n", RequestLineJson(out.prompt_token_ids, out.completions, top_k,
                                        out.prefix_hit_tokens, error, out.prompt_logprobs)
                            .dump()
                            .c_str());
  } else if (o.json) {
    for (const auto& c : out.completions) {
      std::printf("%s\n",
                  CompletionJson(out.prompt_token_ids, c, top_k, out.prefix_hit_tokens,
                                 out.prompt_logprobs)
                      .dump()
                      .c_str());
    }
  } else if (stream_text) {
    std::printf("\n");
  } else {
    PrintCompletionsText(out.completions);
  }
}

// Prints every request's result in input order ({"error": ...} for a
// rejected one). Returns the exit code: 1 when any request was rejected or
// failed.
int PrintOutputs(const RunOptions& o, const std::vector<JsonRequest>& requests,
                 const std::map<int64_t, std::string>& rejected, CliObserver& observer,
                 bool stream_text) {
  int exit_code = rejected.empty() ? 0 : 1;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto rej = rejected.find(static_cast<int64_t>(i));
    if (rej != rejected.end()) {
      std::printf("%s\n", json({{"error", rej->second}}).dump().c_str());
      continue;
    }
    const RequestOutput& out = observer.outputs().at(static_cast<int64_t>(i));
    if (!out.status.ok()) exit_code = 1;
    PrintOutput(o, requests[i], out, stream_text);
  }
  std::fflush(stdout);
  return exit_code;
}

// The summary lines on stderr: throughput and, when speculation ran, its
// acceptance.
void PrintRunStats(const RunOptions& o, size_t num_requests,
                   const coordinator::Scheduler& scheduler, const std::string& draft_name,
                   double seconds) {
  const coordinator::SchedulerStats& st = scheduler.stats();
  kv::KvStats kvs = scheduler.kv_stats();
  std::fputs(absl::StrFormat("tandem run: %d requests, %d prompt tokens computed (%d from prefix "
                             "cache), %d tokens generated in %.3f s: %.1f tokens/s (%d steps, %d "
                             "preemptions)\n",
                             num_requests, st.num_prompt_tokens_computed, kvs.prefix_hit_tokens,
                             st.num_generated_tokens, seconds,
                             seconds > 0 ? st.num_generated_tokens / seconds : 0.0, st.num_steps,
                             st.num_preemptions)
                 .c_str(),
             stderr);
  if (!o.speculative.empty() || st.num_speculative_rounds > 0) {
    std::fprintf(stderr,
                 "tandem run: speculative (%s): %lld rounds, %lld of %lld draft tokens accepted "
                 "(%.1f%%), %.2f tokens per round\n",
                 draft_name.c_str(), static_cast<long long>(st.num_speculative_rounds),
                 static_cast<long long>(st.num_accepted_tokens),
                 static_cast<long long>(st.num_draft_tokens),
                 st.num_draft_tokens > 0 ? 100.0 * st.num_accepted_tokens / st.num_draft_tokens : 0.0,
                 st.num_speculative_rounds > 0
                     ? 1.0 + static_cast<double>(st.num_accepted_tokens) / st.num_speculative_rounds
                     : 0.0);
  }
}

// A single request's latency line on stderr: time to first token, then the
// decode rate.
void PrintLatency(const RequestOutput& out) {
  const double decode_ms = out.latency_ms - out.time_to_first_token_ms;
  int64_t tokens = 0;
  for (const auto& c : out.completions) tokens += static_cast<int64_t>(c.token_ids.size());
  const int64_t decode_tokens = tokens - static_cast<int64_t>(out.completions.size());
  std::fprintf(stderr, "tandem run: time to first token %.1f ms, then %.1f tokens/s\n",
               out.time_to_first_token_ms,
               decode_ms > 0 && decode_tokens > 0 ? decode_tokens * 1000.0 / decode_ms : 0.0);
}

}  // namespace

int RunCommand(const RunOptions& o) {
  int sources = o.prompt.has_value() + o.chat.has_value() + o.prompt_ids.has_value() +
                o.requests_file.has_value();
  if (sources != 1) {
    return Fail(absl::InvalidArgumentError(
        "give exactly one of --prompt, --chat, --prompt-ids or --requests"));
  }
  // Read the request lines first so a missing file fails before the model loads.
  std::vector<std::string> lines;
  if (o.requests_file) {
    absl::StatusOr<std::vector<std::string>> read = ReadRequestLines(*o.requests_file);
    if (!read.ok()) return Fail(read.status());
    lines = *std::move(read);
  }
  absl::StatusOr<LocalEngine> engine = LoadEngine(o);
  if (!engine.ok()) return Fail(engine.status());
  absl::StatusOr<coordinator::SchedulerConfig> sched_config = SchedulerConfigOf(o);
  if (!sched_config.ok()) return Fail(sched_config.status());
  absl::StatusOr<std::unique_ptr<coordinator::DraftPoolSet>> draft_pool =
      MakeDraftPool(o, *engine->tok);
  if (!draft_pool.ok()) return Fail(draft_pool.status());
  // Beam search streams whole best-beam texts that replace each other:
  // printed once done instead.
  const bool stream_text =
      !o.json && !o.requests_file && o.params.n == 1 && !BeamIfRequested(o.beam).has_value();
  CliObserver observer(stream_text);
  coordinator::Scheduler scheduler(*sched_config, engine->group.get(), engine->tok.get(),
                                   &observer);
  coordinator::SpeculationConfig spec_config;
  spec_config.num_speculative_tokens = o.num_speculative_tokens;
  scheduler.set_draft_pool(draft_pool->get(), spec_config);

  // Build and submit every request; a rejected one gets an error line.
  absl::StatusOr<std::vector<JsonRequest>> requests = BuildRequests(o, lines);
  if (!requests.ok()) return Fail(requests.status());
  absl::StatusOr<std::map<int64_t, std::string>> rejected =
      SubmitAll(*requests, *engine, scheduler);
  if (!rejected.ok()) return Fail(rejected.status());
  absl::StatusOr<double> seconds = RunToCompletion(scheduler);
  if (!seconds.ok()) return Fail(seconds.status());

  const int exit_code = PrintOutputs(o, *requests, *rejected, observer, stream_text);
  PrintRunStats(o, requests->size(), scheduler, (*draft_pool)->name(), *seconds);
  if (requests->size() == 1 && observer.outputs().contains(0)) {
    PrintLatency(observer.outputs().at(0));
  }
  return exit_code;
}

}  // namespace tandem::client
