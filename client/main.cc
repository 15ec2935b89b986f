// tandem: the user's command, `tandem COMMAND [flags]`. TandemProgram() below
// lists the subcommands (run, tokenize, generate, chat, bench, up, health,
// make-model), what each does and exactly the flags each takes; `tandem
// --help` and `tandem COMMAND --help` print it, and a flag the command does
// not take is refused by name (common/flags/flag_help.h). Each command's work is in
// client/commands/.
//
// Thread model: the main thread parses flags and runs the command (for run,
// the scheduler loop; the model's thread pool, --threads, runs each forward).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/command_failure.h"
#include "client/commands/bench_command.h"
#include "client/commands/chat_command.h"
#include "client/commands/generate_command.h"
#include "client/commands/health_command.h"
#include "client/commands/make_model_command.h"
#include "client/commands/run_command.h"
#include "client/commands/tokenize_command.h"
#include "client/commands/up_command.h"
#include "client/json_request.h"
#include "client/up_config.h"
#include "common/flags/flag_help.h"
#include "common/flags/given_flags.h"
#include "common/logging.h"
#include "coordinator/scheduler/scheduler.h"
#include "engine/options/engine_flags.h"

// Help texts say what a flag means wherever it is taken; a flag whose meaning
// differs between subcommands gets its text per subcommand in TandemProgram().
ABSL_FLAG(std::string, model, "", "Path of the GGUF model");
ABSL_FLAG(std::optional<std::string>, prompt, std::nullopt,
          "Prompt text (special-token strings are parsed)");
ABSL_FLAG(std::optional<std::string>, chat, std::nullopt,
          "A user message, wrapped in the model's chat template");
ABSL_FLAG(std::string, prompt_ids, "", "Prompt as comma-separated token ids");
ABSL_FLAG(std::string, requests, "",
          "JSONL file of requests, one a line (output as with --json)");
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
ABSL_FLAG(int32_t, prompt_logprobs, -1,
          "Return each prompt token's logprob with this many top alternatives (-1: none; "
          "computes the whole prompt, no prefix cache)");
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
          "Speculative decoding: the draft's kind, ngram, layer-skip:L or model[:PATH]");
ABSL_FLAG(std::string, num_speculative_tokens, "auto",
          "Draft tokens per speculative round: N, or auto (adaptive)");
ABSL_FLAG(bool, do_sample, false,
          "Beam search: sample beams (temperature / top-k / top-p warp the scores)");
ABSL_FLAG(bool, json, false, "Print one JSON object per returned sequence");
ABSL_FLAG(int32_t, max_batched_tokens, 1024, "Token budget of one scheduler step");
ABSL_FLAG(int32_t, max_seqs, 256, "Sequences in one scheduler step");
ABSL_FLAG(bool, prefix_cache, true, "Reuse cached KV blocks of shared prompt prefixes");
ABSL_FLAG(bool, decode, false, "Decode JSON arrays of ids (one a line) back to text");
ABSL_FLAG(std::string, shape, "", "The model's shape: llama3-8b, llama2-7b, smollm2-135m, toy (4 small layers, SmolLM2 vocabulary size) or tiny (2 layers, 1024 tokens; emulated-GPU tests)");
ABSL_FLAG(std::string, dtype, "bf16", "Weight type: bf16 or q8_0");
ABSL_FLAG(std::string, out, "", "Output file");
ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "The server's HOST:PORT");
ABSL_FLAG(std::string, tls_ca, "",
          "Connect with TLS, trusting the PEM CA certificate(s) in this file (a self-signed "
          "server certificate is its own CA); default: the environment's TANDEM_TLS_CA, else "
          "plaintext");
ABSL_FLAG(std::string, tls_cert, "",
          "up: the coordinator's PEM certificate; its gRPC and HTTP ports speak TLS only (needs "
          "--tls-key)");
ABSL_FLAG(std::string, tls_key, "", "up: the PEM private key of --tls-cert");
ABSL_FLAG(int32_t, concurrency, 0, "Requests in flight at once");
ABSL_FLAG(int32_t, timeout_s, -1, "Per-request deadline in seconds");
ABSL_FLAG(int32_t, tp, 2, "Tensor-parallel ranks of the worker group");
ABSL_FLAG(int32_t, replicas, 1,
          "Worker groups (model replicas, --tp ranks each), 1..64; one that exits is restarted");
ABSL_FLAG(int32_t, port, 0, "The coordinator's gRPC port (0 = the OS picks)");
ABSL_FLAG(int32_t, http_port, 8000,
          "up: the coordinator's OpenAI-compatible HTTP port (0 = the OS picks, -1 = off)");
ABSL_FLAG(std::string, bin_dir, "",
          "Where tandem-worker, tandem-draft and tandem-coordinator are (default: beside tandem)");
ABSL_FLAG(std::string, mpirun, "mpirun", "The MPI launcher for --tp > 1");
ABSL_FLAG(int32_t, grace_s, 15, "Seconds each process gets to drain on shutdown");
ABSL_FLAG(std::vector<std::string>, worker_arg, {}, "Extra tandem-worker flags (comma-separated)");
ABSL_FLAG(std::string, draft_model, "",
          "The draft worker's GGUF model (default: --model; none = no draft worker)");
ABSL_FLAG(bool, no_draft, false, "Start no draft worker (same as --draft-model none)");
ABSL_FLAG(std::vector<std::string>, draft_arg, {}, "Extra tandem-draft flags (comma-separated)");
ABSL_FLAG(std::vector<std::string>, coordinator_arg, {},
          "Extra tandem-coordinator flags (comma-separated)");
ABSL_FLAG(std::string, config, "",
          "JSON file of up options (keys: model, tp, replicas, port, draft_model, grace_s, mpirun, "
          "bin_dir, worker_args, draft_args, coordinator_args, tls_cert, tls_key); flags given "
          "win over it");
ABSL_FLAG(std::optional<std::string>, system, std::nullopt, "The system prompt");
ABSL_FLAG(std::string, service, "", "The service name to check (default: the server)");
ABSL_FLAG(double, request_rate, 0, "Poisson arrivals per second (instead of --concurrency)");
ABSL_FLAG(std::string, backend, "tandem",
          "bench: tandem (gRPC to --addr) or openai (any OpenAI-compatible HTTP server at --url)");
ABSL_FLAG(std::string, url, "", "bench --backend openai: the server's http://HOST:PORT/v1");
ABSL_FLAG(int32_t, vocab_size, 0,
          "bench --backend openai: random prompt ids are drawn below this (0: 32000)");
ABSL_FLAG(std::vector<std::string>, goodput, {},
          "bench: SLOs a request must meet to count as goodput, comma-separated "
          "ttft:MS,tpot:MS,e2e:MS");
ABSL_FLAG(int32_t, num_requests, 100, "Requests to send");
ABSL_FLAG(int32_t, input_len, 128, "Random prompt length in tokens");
ABSL_FLAG(int32_t, output_len, 128, "Tokens generated per request");
ABSL_FLAG(std::string, dataset, "", "JSONL requests instead of random prompts");
ABSL_FLAG(int32_t, shared_prefix_len, 0, "Leading prompt tokens shared by all requests");
ABSL_FLAG(std::string, vocab_from, "",
          "Copy the tokenizer of this GGUF (same vocabulary size)");

namespace {

using tandem::TakenFlag;

std::vector<TakenFlag> Join(std::initializer_list<std::vector<TakenFlag>> groups) {
  std::vector<TakenFlag> all;
  for (const std::vector<TakenFlag>& group : groups) all.insert(all.end(), group.begin(), group.end());
  return all;
}

// The subcommands and the flags each takes, in the order --help lists them.
// `tandem bench`'s entry of the command table.
tandem::Command BenchCommandSpec() {
  return {"bench",
          "(--addr HOST:PORT | --backend openai --url http://HOST:PORT/v1) (--concurrency C | "
          "--request-rate R) [flags]",
          "Load a coordinator (or any OpenAI-compatible server) with generated or --dataset "
          "requests; report latency, throughput and goodput",
          {{"addr", "The coordinator's HOST:PORT"}, {"tls_ca"}, {"backend"}, {"url"},
           {"model", "--backend openai: the model name sent (default: the server's first)"},
           {"vocab_size"}, {"goodput"},
           {"concurrency", "Closed loop: requests in flight at once"}, {"request_rate"},
           {"num_requests"}, {"input_len"}, {"output_len"}, {"dataset"}, {"shared_prefix_len"},
           {"seed", "Seed of the random prompts and arrival gaps (-1: 0)"},
           {"out", "JSON report path"},
           {"timeout_s", "Per-request deadline in seconds (-1: 600; 0: none)"}}};
}

tandem::Program TandemProgram() {
  const std::vector<TakenFlag> prompt = {{"prompt"}, {"chat"}, {"prompt_ids"}, {"requests"}};
  const std::vector<TakenFlag> sampling = {
      {"max_tokens"}, {"min_tokens"}, {"temperature"}, {"top_k"}, {"top_p"}, {"min_p"},
      {"repetition_penalty"}, {"presence_penalty"}, {"frequency_penalty"}, {"seed"}, {"n"},
      {"top_logprobs"}, {"prompt_logprobs"}, {"stop"}, {"ignore_eos"}};
  const std::vector<TakenFlag> beam = {
      {"min_new_tokens"}, {"num_beams"}, {"length_penalty"}, {"early_stopping"},
      {"num_return_sequences"}, {"num_beam_groups"}, {"diversity_penalty"}, {"do_sample"},
      {"json"}};
  const TakenFlag deadline = {"timeout_s", "Per-request deadline in seconds (-1 or 0: none)"};
  return tandem::Program{"tandem", {
      {"run", "--model PATH (--prompt TEXT | --chat TEXT | --prompt-ids IDS | --requests FILE) [flags]",
       "Generate in this process (the model loaded here): text, or JSON lines",
       Join({{{"model"}}, prompt, sampling, beam,
             {{"speculative", "Speculative decoding with an in-process draft: ngram, "
                              "layer-skip:L or model[:PATH] (default: off)"},
              {"num_speculative_tokens"}, {"precision"}, {"threads"}, {"device"},
              {"cuda_weights"}, {"cuda_sampling"}, {"cuda_graphs"}, {"gpu_memory_fraction"},
              {"gpus"}, {"kv_cache_bytes"}, {"kv_blocks"}, {"block_size"}, {"max_batched_tokens"},
              {"max_seqs"}, {"prefix_cache"}}})},
      {"tokenize", "--model PATH [--decode] < LINES",
       "Tokenize one JSON string per stdin line into a JSON array of ids (--decode: back)",
       {{"model"}, {"decode"}}},
      {"generate", "--addr HOST:PORT (--prompt TEXT | --chat TEXT | --prompt-ids IDS | --requests FILE) [flags]",
       "Generate through a tandem-coordinator (gRPC), printing what tandem run prints",
       Join({{{"addr", "The coordinator's HOST:PORT"}, {"tls_ca"}}, prompt, sampling, beam,
             {{"concurrency", "--requests: requests in flight at once (0 = 1)"}, deadline}})},
      {"chat", "--addr HOST:PORT [--system TEXT] [sampling flags] < MESSAGES",
       "A multi-turn chat with a coordinator: one user message a line on stdin; /reset, /exit",
       Join({{{"addr", "The coordinator's HOST:PORT"}, {"tls_ca"}, {"system"}}, sampling,
             {deadline}})},
      BenchCommandSpec(),
      {"up", "--model PATH [--tp N] [--replicas N] [--port P] [--draft-model PATH | --no-draft] [flags]",
       "A supervised local cluster in the foreground: worker groups, a draft worker and a coordinator",
       {{"model"}, {"tp"}, {"replicas"}, {"port"}, {"http_port"}, {"draft_model"}, {"no_draft"},
        {"speculative", "The draft worker's kind: ngram, layer-skip:L or model (default: ngram, "
                        "or model with --draft-model)"},
        {"num_speculative_tokens"}, {"config"}, {"bin_dir"}, {"mpirun"}, {"grace_s"},
        {"worker_arg"}, {"draft_arg"}, {"coordinator_arg"}, {"tls_cert"}, {"tls_key"}}},
      {"health", "--addr HOST:PORT [--service NAME]",
       "Print a server's grpc.health.v1 status (SERVING, NOT_SERVING, ...)",
       {{"addr"}, {"tls_ca"}, {"service"},
        {"timeout_s", "Seconds to wait for the answer (-1 or 0: 5)"}}},
      {"make-model", "--shape NAME --dtype bf16|q8_0 --out FILE.gguf",
       "Write a GGUF of a known shape with random weights (for benchmarks)",
       {{"shape"}, {"dtype"}, {"out", "Output GGUF path"},
        {"seed", "Seed of the weights (-1: 0; same seed, same file)"}, {"vocab_from"}}},
  }};
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
  p.prompt_logprobs = absl::GetFlag(FLAGS_prompt_logprobs);
  p.stop = absl::GetFlag(FLAGS_stop);
  p.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  return p;
}

// --seed where -1 (the default) means 0: reproducible unless a seed is given.
uint64_t SeedOrZero() {
  return absl::GetFlag(FLAGS_seed) >= 0 ? static_cast<uint64_t>(absl::GetFlag(FLAGS_seed)) : 0;
}

int MakeModel() {
  tandem::client::MakeModelOptions o;
  o.shape = absl::GetFlag(FLAGS_shape);
  o.dtype = absl::GetFlag(FLAGS_dtype);
  o.out = absl::GetFlag(FLAGS_out);
  o.seed = SeedOrZero();
  o.vocab_from = absl::GetFlag(FLAGS_vocab_from);
  return tandem::client::MakeModelCommand(o);
}

// `tandem up`: the options from the flags, then --config's file for every
// option no flag on the command line (`args`) sets.
int Up(const std::vector<std::string>& args) {
  tandem::client::UpOptions u;
  u.model = absl::GetFlag(FLAGS_model);
  u.tp = absl::GetFlag(FLAGS_tp);
  u.replicas = absl::GetFlag(FLAGS_replicas);
  u.port = absl::GetFlag(FLAGS_port);
  u.http_port = absl::GetFlag(FLAGS_http_port);
  u.bin_dir = absl::GetFlag(FLAGS_bin_dir);
  u.mpirun = absl::GetFlag(FLAGS_mpirun);
  u.grace_s = absl::GetFlag(FLAGS_grace_s);
  u.worker_args = absl::GetFlag(FLAGS_worker_arg);
  u.draft_args = absl::GetFlag(FLAGS_draft_arg);
  u.coordinator_args = absl::GetFlag(FLAGS_coordinator_arg);
  u.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  u.tls_key = absl::GetFlag(FLAGS_tls_key);
  const std::set<std::string> given = tandem::GivenFlagNames(args);
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

// The CA file a client command trusts: --tls-ca, else the environment's
// TANDEM_TLS_CA; "" (plaintext) when neither is set.
std::string TlsCa() {
  if (std::string flag = absl::GetFlag(FLAGS_tls_ca); !flag.empty()) return flag;
  const char* env = std::getenv("TANDEM_TLS_CA");
  return env != nullptr ? env : "";
}

int Chat() {
  tandem::client::ChatOptions c;
  c.addr = absl::GetFlag(FLAGS_addr);
  c.tls_ca = TlsCa();
  c.system = absl::GetFlag(FLAGS_system);
  c.params = SamplingParamsFromFlags();
  c.timeout_s = std::max(0, absl::GetFlag(FLAGS_timeout_s));
  return tandem::client::ChatCommand(c, std::cin, ::isatty(STDIN_FILENO) == 1);
}

int Health() {
  tandem::client::HealthOptions h;
  h.addr = absl::GetFlag(FLAGS_addr);
  h.tls_ca = TlsCa();
  h.service = absl::GetFlag(FLAGS_service);
  if (absl::GetFlag(FLAGS_timeout_s) > 0) h.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  return tandem::client::HealthCommand(h);
}

int Bench() {
  tandem::client::BenchOptions b;
  b.backend = absl::GetFlag(FLAGS_backend);
  b.addr = absl::GetFlag(FLAGS_addr);
  b.tls_ca = TlsCa();
  b.url = absl::GetFlag(FLAGS_url);
  b.model = absl::GetFlag(FLAGS_model);
  b.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  absl::StatusOr<std::vector<tandem::client::LatencySlo>> slos =
      tandem::client::ParseGoodput(absl::GetFlag(FLAGS_goodput));
  if (!slos.ok()) {
    std::fprintf(stderr, "tandem bench: %s\n", std::string(slos.status().message()).c_str());
    return 1;
  }
  b.goodput = *std::move(slos);
  b.concurrency = absl::GetFlag(FLAGS_concurrency);
  b.request_rate = absl::GetFlag(FLAGS_request_rate);
  b.num_requests = absl::GetFlag(FLAGS_num_requests);
  b.input_len = absl::GetFlag(FLAGS_input_len);
  b.output_len = absl::GetFlag(FLAGS_output_len);
  b.dataset = absl::GetFlag(FLAGS_dataset);
  b.shared_prefix_len = absl::GetFlag(FLAGS_shared_prefix_len);
  b.seed = SeedOrZero();
  b.out = absl::GetFlag(FLAGS_out);
  if (absl::GetFlag(FLAGS_timeout_s) >= 0) b.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  return tandem::client::BenchCommand(b);
}

// --model, which run and tokenize require; "" after printing why.
std::string RequiredModel(const std::string& command) {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) std::fprintf(stderr, "tandem %s: --model PATH is required\n", command.c_str());
  return model;
}

int Tokenize() {
  tandem::client::TokenizeOptions o;
  o.model_path = RequiredModel("tokenize");
  if (o.model_path.empty()) return 2;
  o.decode = absl::GetFlag(FLAGS_decode);
  return tandem::client::TokenizeCommand(o);
}

bool ParseIds(const std::string& text, std::vector<int32_t>* ids) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) return false;
    ids->push_back(id);
  }
  return true;
}

// The prompt, sampling and beam flags that run and generate share, into `o`.
// Returns false after printing why a flag's value is rejected.
bool PromptFromFlags(const std::string& command, const std::vector<std::string>& args,
                     tandem::client::RunOptions* o) {
  o->prompt = absl::GetFlag(FLAGS_prompt);
  o->chat = absl::GetFlag(FLAGS_chat);
  // Abseil reads an empty value of an optional flag as "unset"; an explicitly
  // empty prompt must still reach validation (and be rejected there).
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool empty_next = i + 1 < args.size() && args[i + 1].empty();
    if (a == "--prompt=" || (a == "--prompt" && empty_next)) o->prompt = "";
    if (a == "--chat=" || (a == "--chat" && empty_next)) o->chat = "";
  }
  if (!absl::GetFlag(FLAGS_requests).empty()) o->requests_file = absl::GetFlag(FLAGS_requests);
  if (!absl::GetFlag(FLAGS_prompt_ids).empty()) {
    std::vector<int32_t> ids;
    if (!ParseIds(absl::GetFlag(FLAGS_prompt_ids), &ids)) {
      std::fprintf(stderr, "tandem %s: --prompt-ids '%s' is not a comma-separated id list\n",
                   command.c_str(), absl::GetFlag(FLAGS_prompt_ids).c_str());
      return false;
    }
    o->prompt_ids = ids;
  }
  o->params = SamplingParamsFromFlags();
  const int32_t min_new_tokens = absl::GetFlag(FLAGS_min_new_tokens);
  if (min_new_tokens >= 0) o->params.min_tokens = min_new_tokens;
  o->beam.num_beams = absl::GetFlag(FLAGS_num_beams);
  o->beam.length_penalty = absl::GetFlag(FLAGS_length_penalty);
  o->beam.num_return_sequences = absl::GetFlag(FLAGS_num_return_sequences);
  o->beam.num_beam_groups = absl::GetFlag(FLAGS_num_beam_groups);
  o->beam.diversity_penalty = absl::GetFlag(FLAGS_diversity_penalty);
  o->beam.do_sample = absl::GetFlag(FLAGS_do_sample);
  absl::StatusOr<tandem::coordinator::EarlyStopping> es =
      tandem::client::ParseEarlyStopping(absl::GetFlag(FLAGS_early_stopping));
  if (!es.ok()) {
    std::fprintf(stderr, "tandem %s: --%s\n", command.c_str(),
                 std::string(es.status().message()).c_str());
    return false;
  }
  o->beam.early_stopping = *es;
  o->json = absl::GetFlag(FLAGS_json) || o->requests_file.has_value();
  return true;
}

int Generate(const std::vector<std::string>& args) {
  tandem::client::RunOptions o;
  if (!PromptFromFlags("generate", args, &o)) return 1;
  tandem::client::GenerateOptions g;
  g.addr = absl::GetFlag(FLAGS_addr);
  g.tls_ca = TlsCa();
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

int Run(const std::vector<std::string>& args) {
  tandem::client::RunOptions o;
  o.model_path = RequiredModel("run");
  if (o.model_path.empty()) return 2;
  if (!PromptFromFlags("run", args, &o)) return 1;
  // The scheduler never batches more than --max-batched-tokens: the device
  // scratch is sized for it.
  absl::StatusOr<tandem::engine::EngineOptions> engine = tandem::engine::EngineOptionsFromFlags(
      {.max_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens)});
  if (!engine.ok()) return tandem::client::CommandFailed("run", engine.status());
  o.engine = *std::move(engine);
  o.speculative = absl::GetFlag(FLAGS_speculative);
  absl::StatusOr<int32_t> n =
      tandem::coordinator::ParseNumSpeculativeTokens(absl::GetFlag(FLAGS_num_speculative_tokens));
  if (!n.ok()) {
    std::fprintf(stderr, "tandem run: --%s\n", std::string(n.status().message()).c_str());
    return 1;
  }
  o.num_speculative_tokens = *n;
  o.max_num_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens);
  o.max_num_seqs = absl::GetFlag(FLAGS_max_seqs);
  o.enable_prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
  return tandem::client::RunCommand(o);
}

}  // namespace

int main(int argc, char** argv) {
  const tandem::Program program = TandemProgram();
  const tandem::ParsedCommandLine parsed = tandem::ParseCommandLineOrExit(program, argc, argv);
  const std::string& command = parsed.command->name;
  if (command == "run") return Run(parsed.args);
  if (command == "generate") return Generate(parsed.args);
  if (command == "tokenize") return Tokenize();
  if (command == "chat") return Chat();
  if (command == "bench") return Bench();
  if (command == "up") return Up(parsed.args);
  if (command == "health") return Health();
  if (command == "make-model") return MakeModel();
  CHECK(false, "tandem: command '%s' is in TandemProgram() but has no handler", command);
  return 2;
}
