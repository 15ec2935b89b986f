// tandem: the user's command. Subcommands:
//   tandem run --model PATH (--prompt TEXT | --chat TEXT | --prompt-ids IDS | --requests FILE) ...
//   tandem tokenize --model PATH [--decode]
//   tandem generate --addr HOST:PORT (--prompt TEXT | --chat TEXT | --prompt-ids IDS | --requests FILE)
//   tandem bench --addr HOST:PORT (--concurrency C | --request-rate R) [--num-requests N] ...
//   tandem up --model PATH [--tp N] [--port P] [--draft-model PATH | --no-draft]
//             [--config FILE.json]   (coordinator + worker group + draft worker, foreground)
//   tandem chat --addr HOST:PORT [--system TEXT] [sampling flags]   (stdin: one message a line)
//   tandem health --addr HOST:PORT [--service NAME]
//   tandem make-model --shape NAME --dtype bf16|q8_0 --out FILE.gguf [--seed S] [--vocab-from GGUF]
//
// Thread model: the main thread parses flags and runs the scheduler loop; the
// model's thread pool (--threads, default every core) runs each forward.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/command_line.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/commands/bench_command.h"
#include "client/commands/chat_command.h"
#include "client/commands/generate_command.h"
#include "client/given_flags.h"
#include "client/commands/health_command.h"
#include "client/json_request.h"
#include "coordinator/scheduler.h"
#include "client/commands/up_command.h"
#include "client/up_config.h"
#include "client/commands/make_model_command.h"
#include "client/commands/run_command.h"
#include "client/commands/tokenize_command.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model");
ABSL_FLAG(std::optional<std::string>, prompt, std::nullopt,
          "Prompt text (special-token strings are parsed)");
ABSL_FLAG(std::optional<std::string>, chat, std::nullopt,
          "A user message, wrapped in the model's chat template");
ABSL_FLAG(std::string, prompt_ids, "", "Prompt as comma-separated token ids");
ABSL_FLAG(std::string, requests, "", "JSONL file: one request per line (run); --json output");
ABSL_FLAG(int32_t, max_tokens, 256, "Maximum new tokens per sequence");
ABSL_FLAG(int32_t, min_tokens, 0, "Minimum new tokens (EOS masked until reached)");
ABSL_FLAG(double, temperature, 1.0, "Sampling temperature; 0 = greedy");
ABSL_FLAG(int32_t, top_k, 0, "Top-k; 0 = off");
ABSL_FLAG(double, top_p, 1.0, "Top-p (nucleus), in (0, 1]");
ABSL_FLAG(double, min_p, 0.0, "Min-p, in [0, 1]");
ABSL_FLAG(double, repetition_penalty, 1.0, "Repetition penalty (> 0; 1 = off)");
ABSL_FLAG(double, presence_penalty, 0.0, "Presence penalty in [-2, 2]");
ABSL_FLAG(double, frequency_penalty, 0.0, "Frequency penalty in [-2, 2]");
ABSL_FLAG(int64_t, seed, -1, "Random seed (-1: random)");
ABSL_FLAG(int32_t, n, 1, "Completions per prompt");
ABSL_FLAG(int32_t, top_logprobs, 0, "Return the top-K logprobs per generated position");
ABSL_FLAG(std::vector<std::string>, stop, {}, "Stop strings (comma-separated)");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating after EOS");
ABSL_FLAG(int32_t, num_beams, 1, "Beam search with this many beams (> 1; transformers semantics)");
ABSL_FLAG(double, length_penalty, 1.0, "Beam search: hypothesis score = sum logprob / len^this");
ABSL_FLAG(std::string, early_stopping, "false", "Beam search: true, false or never");
ABSL_FLAG(int32_t, num_return_sequences, 1, "Beam search: sequences returned, best first");
ABSL_FLAG(int32_t, min_new_tokens, -1, "EOS masked until this many tokens (= --min-tokens)");
ABSL_FLAG(int32_t, num_beam_groups, 1, "Diverse beam search: groups of beams");
ABSL_FLAG(double, diversity_penalty, 0.0, "Diverse beam search: Hamming diversity penalty");
ABSL_FLAG(std::string, speculative, "",
          "run: speculative decoding with an in-process draft: ngram, layer-skip:L or "
          "model[:PATH] (default: off); up: the draft worker's kind (default ngram, or model "
          "with --draft-model)");
ABSL_FLAG(std::string, num_speculative_tokens, "auto",
          "run: draft tokens per speculative round, N or auto (adaptive)");
ABSL_FLAG(bool, do_sample, false,
          "Beam search: sample beams (temperature / top-k / top-p warp the scores)");
ABSL_FLAG(bool, json, false, "Print one JSON object per returned sequence");
ABSL_FLAG(std::string, precision, "fast", "fast (quantized kernels, f16 KV) or reference (f32)");
ABSL_FLAG(int32_t, threads, 0, "Threads for one forward (0 = every core)");
ABSL_FLAG(int64_t, kv_cache_bytes, 512ll << 20, "KV cache capacity in bytes");
ABSL_FLAG(int32_t, kv_blocks, 0, "KV cache capacity in blocks (overrides --kv-cache-bytes)");
ABSL_FLAG(int32_t, block_size, 16, "Tokens per KV block");
ABSL_FLAG(int32_t, max_batched_tokens, 1024, "Token budget of one scheduler step");
ABSL_FLAG(int32_t, max_seqs, 256, "Sequences in one scheduler step");
ABSL_FLAG(bool, prefix_cache, true, "Reuse cached KV blocks of shared prompt prefixes");
ABSL_FLAG(bool, decode, false, "tokenize: decode JSON arrays of ids back to text");
ABSL_FLAG(std::string, shape, "", "make-model: llama3-8b, llama2-7b or smollm2-135m");
ABSL_FLAG(std::string, dtype, "bf16", "make-model: weight type, bf16 or q8_0");
ABSL_FLAG(std::string, out, "", "make-model: output GGUF path; bench: JSON report path");
ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "generate: the coordinator's HOST:PORT");
ABSL_FLAG(int32_t, concurrency, 0,
          "generate --requests: requests in flight at once (default 1); bench: closed-loop "
          "concurrency");
ABSL_FLAG(int32_t, timeout_s, -1,
          "generate/bench: per-request deadline in seconds (0 = none; default: none for "
          "generate, 600 for bench)");
ABSL_FLAG(int32_t, tp, 2, "up: tensor-parallel ranks of the worker group");
ABSL_FLAG(int32_t, port, 0, "up: the coordinator's port (0 = the OS picks)");
ABSL_FLAG(std::string, bin_dir, "", "up: where tandem-worker/tandem-coordinator are (default: here)");
ABSL_FLAG(std::string, mpirun, "mpirun", "up: the MPI launcher for --tp > 1");
ABSL_FLAG(int32_t, grace_s, 15, "up: seconds each process gets to drain on shutdown");
ABSL_FLAG(std::vector<std::string>, worker_arg, {}, "up: extra tandem-worker flags (comma-separated)");
ABSL_FLAG(std::string, draft_model, "",
          "up: the draft worker's GGUF model (default: --model; none = no draft worker)");
ABSL_FLAG(bool, no_draft, false, "up: start no draft worker (same as --draft-model none)");
ABSL_FLAG(std::vector<std::string>, draft_arg, {}, "up: extra tandem-draft flags (comma-separated)");
ABSL_FLAG(std::vector<std::string>, coordinator_arg, {},
          "up: extra tandem-coordinator flags (comma-separated)");
ABSL_FLAG(std::string, config, "",
          "up: JSON file of up options (keys: model, tp, port, draft_model, grace_s, mpirun, "
          "bin_dir, worker_args, draft_args, coordinator_args); flags given win over it");
ABSL_FLAG(std::optional<std::string>, system, std::nullopt, "chat: the system prompt");
ABSL_FLAG(std::string, service, "", "health: the service name to check (default: the server)");
ABSL_FLAG(double, request_rate, 0, "bench: Poisson arrivals per second (instead of --concurrency)");
ABSL_FLAG(int32_t, num_requests, 100, "bench: requests to send");
ABSL_FLAG(int32_t, input_len, 128, "bench: random prompt length in tokens");
ABSL_FLAG(int32_t, output_len, 128, "bench: tokens generated per request");
ABSL_FLAG(std::string, dataset, "", "bench: JSONL requests instead of random prompts");
ABSL_FLAG(int32_t, shared_prefix_len, 0, "bench: leading prompt tokens shared by all requests");
ABSL_FLAG(std::string, vocab_from, "",
          "make-model: copy the tokenizer of this GGUF (same vocabulary size)");

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: tandem run|tokenize --model PATH [flags]\n"
               "       tandem generate --addr HOST:PORT [prompt and sampling flags]\n"
               "       tandem bench --addr HOST:PORT (--concurrency C | --request-rate R)\n"
               "       tandem up --model PATH [--tp N] [--port P] [--draft-model PATH | --no-draft]\n"
               "       tandem up --config FILE.json [flags that override it]\n"
               "       tandem chat --addr HOST:PORT [--system TEXT] [sampling flags]\n"
               "       tandem health --addr HOST:PORT\n"
               "       tandem make-model --shape NAME --dtype bf16|q8_0 --out FILE.gguf\n"
               "       (--help for flags)\n");
  return 2;
}

// The sampling flags, shared by run, generate and chat.
tandem::sampling::SamplingParams SamplingParamsFromFlags() {
  tandem::sampling::SamplingParams p;
  p.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  p.min_tokens = absl::GetFlag(FLAGS_min_tokens);
  p.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  p.top_k = absl::GetFlag(FLAGS_top_k);
  p.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  p.min_p = static_cast<float>(absl::GetFlag(FLAGS_min_p));
  p.repetition_penalty = static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty));
  p.presence_penalty = static_cast<float>(absl::GetFlag(FLAGS_presence_penalty));
  p.frequency_penalty = static_cast<float>(absl::GetFlag(FLAGS_frequency_penalty));
  if (absl::GetFlag(FLAGS_seed) >= 0) p.seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));
  p.n = absl::GetFlag(FLAGS_n);
  p.logprobs = absl::GetFlag(FLAGS_top_logprobs);
  p.stop = absl::GetFlag(FLAGS_stop);
  p.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  return p;
}

// `tandem up`: the options from the flags, then --config's file for every
// option no flag on the command line (`args`) sets.
int Up(const std::vector<std::string>& args) {
  tandem::client::UpOptions u;
  u.model = absl::GetFlag(FLAGS_model);
  u.tp = absl::GetFlag(FLAGS_tp);
  u.port = absl::GetFlag(FLAGS_port);
  u.bin_dir = absl::GetFlag(FLAGS_bin_dir);
  u.mpirun = absl::GetFlag(FLAGS_mpirun);
  u.grace_s = absl::GetFlag(FLAGS_grace_s);
  u.worker_args = absl::GetFlag(FLAGS_worker_arg);
  u.draft_args = absl::GetFlag(FLAGS_draft_arg);
  u.coordinator_args = absl::GetFlag(FLAGS_coordinator_arg);
  const std::set<std::string> given = tandem::client::GivenFlagNames(args);
  if (absl::GetFlag(FLAGS_no_draft)) {
    if (given.contains("draft_model") && absl::GetFlag(FLAGS_draft_model) != "none") {
      std::fprintf(stderr, "tandem up: --no-draft contradicts --draft-model %s\n",
                   absl::GetFlag(FLAGS_draft_model).c_str());
      return 2;
    }
    tandem::client::SetDraftModel("none", &u);
  } else {
    tandem::client::SetDraftModel(absl::GetFlag(FLAGS_draft_model), &u);
  }
  if (!absl::GetFlag(FLAGS_speculative).empty()) {
    u.speculative = absl::GetFlag(FLAGS_speculative);
  } else if (given.contains("draft_model") && u.draft) {
    u.speculative = "model";  // a draft model was named: draft with it
  }
  u.num_speculative_tokens = absl::GetFlag(FLAGS_num_speculative_tokens);
  if (const std::string config = absl::GetFlag(FLAGS_config); !config.empty()) {
    std::set<std::string> keep;
    for (const std::string& flag : given) {
      if (std::string key = tandem::client::UpConfigKeyOfFlag(flag); !key.empty()) keep.insert(key);
    }
    if (absl::Status s = tandem::client::ApplyUpConfigFile(config, keep, &u); !s.ok()) {
      std::fprintf(stderr, "tandem up: %s\n", s.ToString().c_str());
      return 2;
    }
  }
  return tandem::client::UpCommand(u);
}

bool ParseIds(const std::string& text, std::vector<int32_t>* ids) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) return false;
    ids->push_back(id);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "tandem run|tokenize|generate|chat|bench|up|health|make-model [flags]");
  tandem::NormalizedArgs normalized_args(argc, argv);
  const std::vector<std::string>& normalized = normalized_args.args();
  std::vector<char*> args = absl::ParseCommandLine(normalized_args.argc(), normalized_args.argv());
  if (args.size() != 2) return Usage();
  const std::string command = args[1];
  if (command == "make-model") {
    tandem::client::MakeModelOptions o;
    o.shape = absl::GetFlag(FLAGS_shape);
    o.dtype = absl::GetFlag(FLAGS_dtype);
    o.out = absl::GetFlag(FLAGS_out);
    // Reproducible by default: seed 0 unless one is given.
    o.seed = absl::GetFlag(FLAGS_seed) >= 0 ? static_cast<uint64_t>(absl::GetFlag(FLAGS_seed)) : 0;
    o.vocab_from = absl::GetFlag(FLAGS_vocab_from);
    return tandem::client::MakeModelCommand(o);
  }
  if (command == "up") return Up(normalized);
  if (command == "chat") {
    for (const char* prompt_flag : {"prompt", "chat", "prompt_ids", "requests"}) {
      if (tandem::client::GivenFlagNames(normalized).contains(prompt_flag)) {
        std::fprintf(stderr, "tandem chat: --%s is not used: the messages come from stdin\n",
                     prompt_flag);
        return 2;
      }
    }
    tandem::client::ChatOptions c;
    c.addr = absl::GetFlag(FLAGS_addr);
    c.system = absl::GetFlag(FLAGS_system);
    c.params = SamplingParamsFromFlags();
    c.timeout_s = std::max(0, absl::GetFlag(FLAGS_timeout_s));
    return tandem::client::ChatCommand(c, std::cin, ::isatty(STDIN_FILENO) == 1);
  }
  if (command == "health") {
    tandem::client::HealthOptions h;
    h.addr = absl::GetFlag(FLAGS_addr);
    h.service = absl::GetFlag(FLAGS_service);
    if (absl::GetFlag(FLAGS_timeout_s) > 0) h.timeout_s = absl::GetFlag(FLAGS_timeout_s);
    return tandem::client::HealthCommand(h);
  }
  if (command == "bench") {
    tandem::client::BenchOptions b;
    b.addr = absl::GetFlag(FLAGS_addr);
    b.concurrency = absl::GetFlag(FLAGS_concurrency);
    b.request_rate = absl::GetFlag(FLAGS_request_rate);
    b.num_requests = absl::GetFlag(FLAGS_num_requests);
    b.input_len = absl::GetFlag(FLAGS_input_len);
    b.output_len = absl::GetFlag(FLAGS_output_len);
    b.dataset = absl::GetFlag(FLAGS_dataset);
    b.shared_prefix_len = absl::GetFlag(FLAGS_shared_prefix_len);
    b.seed = absl::GetFlag(FLAGS_seed) >= 0 ? static_cast<uint64_t>(absl::GetFlag(FLAGS_seed)) : 0;
    b.out = absl::GetFlag(FLAGS_out);
    if (absl::GetFlag(FLAGS_timeout_s) >= 0) b.timeout_s = absl::GetFlag(FLAGS_timeout_s);
    return tandem::client::BenchCommand(b);
  }
  const std::string model = absl::GetFlag(FLAGS_model);
  const bool generate = command == "generate";
  if (model.empty() && !generate) {
    std::fprintf(stderr, "tandem %s: --model PATH is required\n", command.c_str());
    return 2;
  }
  if (command == "tokenize") {
    tandem::client::TokenizeOptions o;
    o.model_path = model;
    o.decode = absl::GetFlag(FLAGS_decode);
    return tandem::client::TokenizeCommand(o);
  }
  if (command != "run" && !generate) return Usage();

  tandem::client::RunOptions o;
  o.model_path = model;
  o.prompt = absl::GetFlag(FLAGS_prompt);
  o.chat = absl::GetFlag(FLAGS_chat);
  // Abseil reads an empty value of an optional flag as "unset"; an explicitly
  // empty prompt must still reach validation (and be rejected there).
  for (size_t i = 1; i < normalized.size(); ++i) {
    const std::string& a = normalized[i];
    bool empty_next = i + 1 < normalized.size() && normalized[i + 1].empty();
    if (a == "--prompt=" || (a == "--prompt" && empty_next)) o.prompt = "";
    if (a == "--chat=" || (a == "--chat" && empty_next)) o.chat = "";
  }
  if (!absl::GetFlag(FLAGS_requests).empty()) o.requests_file = absl::GetFlag(FLAGS_requests);
  if (!absl::GetFlag(FLAGS_prompt_ids).empty()) {
    std::vector<int32_t> ids;
    if (!ParseIds(absl::GetFlag(FLAGS_prompt_ids), &ids)) {
      std::fprintf(stderr, "tandem %s: --prompt-ids '%s' is not a comma-separated id list\n",
                   command.c_str(), absl::GetFlag(FLAGS_prompt_ids).c_str());
      return 1;
    }
    o.prompt_ids = ids;
  }
  o.params = SamplingParamsFromFlags();
  if (absl::GetFlag(FLAGS_min_new_tokens) >= 0) o.params.min_tokens = absl::GetFlag(FLAGS_min_new_tokens);
  o.beam.num_beams = absl::GetFlag(FLAGS_num_beams);
  o.beam.length_penalty = absl::GetFlag(FLAGS_length_penalty);
  o.beam.num_return_sequences = absl::GetFlag(FLAGS_num_return_sequences);
  o.beam.num_beam_groups = absl::GetFlag(FLAGS_num_beam_groups);
  o.beam.diversity_penalty = absl::GetFlag(FLAGS_diversity_penalty);
  o.beam.do_sample = absl::GetFlag(FLAGS_do_sample);
  {
    absl::StatusOr<tandem::coordinator::EarlyStopping> es =
        tandem::client::ParseEarlyStopping(absl::GetFlag(FLAGS_early_stopping));
    if (!es.ok()) {
      std::fprintf(stderr, "tandem %s: --%s\n", command.c_str(), std::string(es.status().message()).c_str());
      return 1;
    }
    o.beam.early_stopping = *es;
  }
  o.json = absl::GetFlag(FLAGS_json) || o.requests_file.has_value();
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision == "reference") {
    o.precision = tandem::model::Precision::kReference;
  } else if (precision != "fast") {
    std::fprintf(stderr, "tandem run: --precision '%s' must be fast or reference\n",
                 precision.c_str());
    return 1;
  }
  if (generate) {
    tandem::client::GenerateOptions g;
    g.addr = absl::GetFlag(FLAGS_addr);
    g.prompt = o.prompt;
    g.chat = o.chat;
    g.prompt_ids = o.prompt_ids;
    g.requests_file = o.requests_file;
    g.params = o.params;
    g.beam = o.beam;
    g.json = o.json;
    g.concurrency = std::max(1, absl::GetFlag(FLAGS_concurrency));
    g.timeout_s = std::max(0, absl::GetFlag(FLAGS_timeout_s));
    return tandem::client::GenerateCommand(g);
  }
  o.speculative = absl::GetFlag(FLAGS_speculative);
  {
    absl::StatusOr<int32_t> n =
        tandem::coordinator::ParseNumSpeculativeTokens(absl::GetFlag(FLAGS_num_speculative_tokens));
    if (!n.ok()) {
      std::fprintf(stderr, "tandem run: --%s\n", std::string(n.status().message()).c_str());
      return 1;
    }
    o.num_speculative_tokens = *n;
  }
  o.num_threads = absl::GetFlag(FLAGS_threads);
  o.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_bytes);
  o.kv_blocks = absl::GetFlag(FLAGS_kv_blocks);
  o.block_size = absl::GetFlag(FLAGS_block_size);
  o.max_num_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens);
  o.max_num_seqs = absl::GetFlag(FLAGS_max_seqs);
  o.enable_prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
  return tandem::client::RunCommand(o);
}
