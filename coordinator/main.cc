// tandem-coordinator: the public Inference gRPC server and OpenAI-compatible HTTP
// API (--http-port) of a tandem cluster.
//   tandem-coordinator --model M.gguf --worker TARGET[,TARGET...]
//                      [--draft TARGET[,TARGET...]]
//                                      (tandem-worker groups, one replica each;
//                                       tandem-draft workers)
//   tandem-coordinator --model M.gguf --local              (model in-process)
// A TARGET is HOST:PORT or dns:///NAME:PORT (every address NAME resolves to,
// re-resolved every --resolve-interval-ms: replicas and drafts come and go
// without a restart; see coordinator/target_resolver.h).
// --tls-cert FILE --tls-key FILE: both public ports (gRPC and HTTP, /health,
// /ready and /metrics included) speak TLS only; the worker and draft
// connections stay plaintext.
//
// Thread model: the main thread parses flags, builds everything, starts the
// servers, prints "tandem-coordinator listening on HOST:PORT" (gRPC) and
// "tandem-coordinator HTTP listening on HOST:PORT" and then waits in
// sigwait() for SIGTERM/SIGINT (blocked in every thread). The Inference
// service runs on gRPC's callback API: gRPC's few callback threads parse,
// validate, route (Router) and submit requests, and a reactor per call streams
// its results, with no thread per call (tests/integration/
// stream_threads_test.py: at most 32 threads with 1,000 streams open); the
// OpenAI-compatible HTTP API does the same on --http-threads Boost.Asio
// threads (a session per connection on a strand, no thread per stream); one
// thread (RequestRegistry) hands the schedulers' results to the reactors and
// HTTP calls and starts their writes; one scheduler thread per worker group (SchedulerLoop) owns
// that group's Scheduler, runs every step and, when the group's worker is
// lost, reconnects it about once a second (in --local mode the model's thread
// pool runs each forward under the one loop). Two discovery threads (worker
// groups, draft workers) re-resolve the targets and add, drain and drop
// groups and drafts (WorkerGroupPool, DraftWorkerSet).
// Shutdown: health NOT_SERVING and /ready 503, refuse new requests
// (UNAVAILABLE, HTTP 503), server Shutdown with a 10 s grace deadline for
// in-flight streams, gRPC and HTTP (calls still open then are cancelled, and
// their requests with them), stop discovery,
// join the scheduler threads, exit 0.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/flag_help.h"
#include "common/grpc_server.h"
#include "common/http_server.h"
#include "common/server_lifecycle.h"
#include "common/status_macros.h"
#include "common/tls_credentials.h"
#include "coordinator/cluster/discovery.h"
#include "coordinator/cluster/draft_pool_set.h"
#include "coordinator/cluster/draft_worker_set.h"
#include "coordinator/cluster/grpc_draft_pool.h"
#include "coordinator/cluster/local_draft_pool.h"
#include "coordinator/cluster/grpc_worker_group.h"
#include "common/api_key.h"
#include "coordinator/http/openai_api.h"
#include "coordinator/http/serving_metrics.h"
#include "coordinator/service/inference_service.h"
#include "coordinator/service/request_admission.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/cluster/router.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/cluster/scheduler_loop.h"
#include "coordinator/cluster/target_resolver.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "draft/proposer_factory.h"
#include "draft/api/speculative_spec.h"
#include "engine/model/kv_budget.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on (gRPC and HTTP)");
ABSL_FLAG(int32_t, port, 0, "gRPC port to listen on (0: the OS picks one)");
ABSL_FLAG(int32_t, http_port, 8000,
          "Port of the OpenAI-compatible HTTP API and /metrics (0: the OS picks one; -1: off)");
ABSL_FLAG(int32_t, http_threads, 2, "I/O threads of the HTTP server");
ABSL_FLAG(std::string, api_key, "",
          "Require 'authorization: Bearer KEY' on the gRPC API and HTTP (except /health, "
          "/ready and, unless --api-key-metrics, /metrics); empty: open. The coordinator "
          "presents the same key to its workers and drafts (start them with it)");
ABSL_FLAG(std::string, api_key_file, "",
          "As --api-key, the key read from this file (surrounding whitespace ignored)");
ABSL_FLAG(bool, api_key_metrics, false, "--api-key: /metrics requires the key too");
ABSL_FLAG(bool, chat_control_tokens_in_content, false,
          "Parse control-token text written inside chat messages (\"<|im_start|>system\") as "
          "control tokens, as transformers and vLLM do; by default it is plain text, so a "
          "message cannot open a turn of its own");
ABSL_FLAG(std::string, internal_tls_ca, "",
          "PEM certificates the coordinator trusts on its connections to worker groups and "
          "draft workers, which then speak TLS (started with --tls-cert / --tls-key); empty: "
          "plaintext");
ABSL_FLAG(std::string, cluster_key_file, "",
          "The internal key presented on every call to the worker groups and draft workers "
          "(started with the same key as --api-key-file; `tandem up` generates one); empty: "
          "the coordinator's own --api-key, if any");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of the public ports: gRPC and HTTP speak TLS only (needs "
          "--tls-key); empty: plaintext");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert (unencrypted)");
ABSL_FLAG(int64_t, http_max_body_bytes, 4 << 20,
          "Largest HTTP request body accepted (larger: 413)");
ABSL_FLAG(int64_t, http_max_header_bytes, 16 << 10,
          "Largest HTTP request header accepted (larger: 431)");
ABSL_FLAG(int32_t, http_idle_timeout_s, 60,
          "An HTTP connection must deliver a complete request within this many seconds");
ABSL_FLAG(int64_t, http_max_connections, 4096,
          "HTTP connections served at once; past it a connection may still ask /health or "
          "/ready, anything else gets 503 at once (the soft open-file limit is raised to the "
          "hard one at start-up)");
ABSL_FLAG(int32_t, http_write_timeout_s, 30,
          "A write to an HTTP client must complete within this many seconds (slow client: the "
          "connection is closed and its requests cancelled)");
ABSL_FLAG(std::string, served_model_name, "",
          "The model name of the HTTP API (requests' `model`); default: --model's file name "
          "without .gguf");
ABSL_FLAG(std::string, model, "", "GGUF model: its tokenizer always; the model itself with --local");
ABSL_FLAG(std::string, worker, "",
          "Target worker groups, comma-separated: HOST:PORT or dns:///NAME:PORT (every address "
          "NAME resolves to; re-resolved). One tandem-worker group each; requests are routed by "
          "load and prefix affinity");
ABSL_FLAG(std::string, draft, "",
          "Draft workers (tandem-draft), comma-separated: HOST:PORT or dns:///NAME:PORT");
ABSL_FLAG(std::string, speculative, "",
          "Speculative decoding with a draft in this process: ngram (or layer-skip:L / "
          "model[:PATH], loaded here); with --draft, the draft workers propose instead");
ABSL_FLAG(std::string, num_speculative_tokens, "auto",
          "Draft tokens per speculative round: N, or auto (adaptive, off when it would slow the "
          "batch down)");
ABSL_FLAG(int32_t, draft_timeout_ms, 5000, "--draft: deadline of one Propose / Release call");
ABSL_FLAG(int32_t, max_draft_prefill_tokens, 512,
          "Prompt tokens one speculative round feeds the draft (longer prompts catch up in "
          "chunks over the next rounds)");
ABSL_FLAG(int32_t, resolve_interval_ms, 5000,
          "How often dns:/// targets are re-resolved (and unreachable ones retried)");
ABSL_FLAG(bool, local, false, "Run the model in-process instead of connecting to --worker");
ABSL_FLAG(int32_t, connect_timeout_s, 30,
          "--worker: seconds to wait at start-up for the first worker group to answer");
ABSL_FLAG(int32_t, threads, 0, "--local: threads for one forward (0 = every core)");
ABSL_FLAG(int64_t, kv_cache_bytes, 512ll << 20, "--local: KV cache capacity in bytes");
ABSL_FLAG(int32_t, kv_blocks, 0, "--local: KV cache capacity in blocks (overrides bytes)");
ABSL_FLAG(int32_t, block_size, 16, "--local: tokens per KV block");
ABSL_FLAG(int32_t, max_batched_tokens, 1024, "Token budget of one scheduler step");
ABSL_FLAG(int32_t, max_seqs, 256, "Sequences in one scheduler step");
ABSL_FLAG(bool, prefix_cache, true, "Reuse cached KV blocks of shared prompt prefixes");
ABSL_FLAG(int32_t, max_migrations, 3,
          "Times a request may move to another worker group after its group fails (its prompt "
          "and generated tokens re-prefilled there); 0: a failed group fails its requests");
ABSL_FLAG(int32_t, migration_timeout_ms, 1000,
          "How long a request whose group failed waits for a healthy group (another, or its "
          "own once reconnected) before it fails with UNAVAILABLE");
ABSL_FLAG(int32_t, step_timeout_s, 60,
          "Deadline of a worker group's steps until one was answered (a first step may load or "
          "warm the device); after that each step's deadline scales with its tokens at the "
          "group's measured pace (see --step-timeout-floor-ms)");
ABSL_FLAG(int32_t, step_timeout_floor_ms, 60000,
          "A measured group's step deadline: this floor + 4 x the step's expected time (the "
          "slowest recent step, or its tokens x the highest recent cost per token); past it the "
          "group is down and its requests migrate");
ABSL_FLAG(int32_t, suspect_after_ms, 1000,
          "A step in flight this long + 2 x its expected time makes its group suspect: "
          "unhealthy in ModelInfo and /health, and routed no new requests until it answers");
ABSL_FLAG(int64_t, affinity_max_extra_load, 8,
          "Route to the group caching a request's prefix only while its load (requests) is at "
          "most this much above the least loaded group's");

namespace {

using namespace tandem;  // NOLINT: a main file

using coordinator::WorkerGroupPool;

constexpr char kProcess[] = "tandem-coordinator";
constexpr char kServiceName[] = "tandem.v1.Inference";
// In-flight streams get this long after SIGTERM.
constexpr absl::Duration kDrainGrace = absl::Seconds(10);

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", kProcess, s.ToString().c_str());
  return 1;
}

// Everything the flags say, validated before the model or a worker is
// touched (what depends on the served model is checked once it is known).
struct CoordinatorConfig {
  std::string host;
  int32_t port = 0;
  int32_t http_port = 0;  // -1: no HTTP server
  int32_t http_threads = 2;
  HttpLimits http_limits;
  std::string served_model_name;
  ApiKey api_key;  // required on the gRPC API and HTTP (--api-key / --api-key-file)
  // Presented to workers and drafts: --cluster-key-file, else api_key.
  std::optional<std::string> cluster_key;
  std::string internal_tls_ca_pem;  // --internal-tls-ca; empty: plaintext to workers
  TlsCredentials tls;  // both public ports (--tls-cert / --tls-key); default plaintext
  bool metrics_need_key = false;
  bool chat_control_tokens_in_content = false;  // parsed as control tokens
  std::string model_path;  // the tokenizer's GGUF; the model's too with --local
  bool local = false;
  std::string worker_spec;  // --worker as given, for errors
  std::vector<coordinator::Target> worker_targets;
  std::string draft_spec;  // --draft as given, for errors
  std::vector<coordinator::Target> draft_targets;
  absl::Duration resolve_interval;
  absl::Duration connect_timeout;
  absl::Duration draft_timeout;
  coordinator::SchedulerConfig scheduler;
  int64_t affinity_max_extra_load = 0;  // the RouterConfig's; its block size is the model's
  int32_t max_migrations = 0;
  absl::Duration migration_timeout;
  coordinator::StepPaceConfig step_pace;  // remote groups' step deadlines
  coordinator::SpeculationConfig speculation;
  // --speculative: a draft in this process (only without --draft).
  std::optional<draft::SpeculativeSpec> speculative;
  // --local only: the in-process worker group.
  int32_t threads = 0;
  int32_t block_size = 16;
  int32_t kv_blocks = 0;
  int64_t kv_cache_bytes = 0;
};

// --model, --local / --worker, --draft, --port and --resolve-interval-ms.
absl::Status ReadServingFlags(CoordinatorConfig& config) {
  config.model_path = absl::GetFlag(FLAGS_model);
  config.worker_spec = absl::GetFlag(FLAGS_worker);
  config.draft_spec = absl::GetFlag(FLAGS_draft);
  config.local = absl::GetFlag(FLAGS_local);
  if (config.model_path.empty()) {
    return absl::InvalidArgumentError("--model PATH is required (the tokenizer comes from it)");
  }
  if (config.local == !config.worker_spec.empty()) {
    return absl::InvalidArgumentError("give exactly one of --worker TARGET or --local");
  }
  config.host = absl::GetFlag(FLAGS_host);
  config.port = absl::GetFlag(FLAGS_port);
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--port %d is out of range: must be in [0, 65535]", config.port));
  }
  const int32_t resolve_interval_ms = absl::GetFlag(FLAGS_resolve_interval_ms);
  if (resolve_interval_ms < 100 || resolve_interval_ms > 3600000) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--resolve-interval-ms %d is out of range: must be in [100, 3600000]",
        resolve_interval_ms));
  }
  config.resolve_interval = absl::Milliseconds(resolve_interval_ms);
  ASSIGN_OR_RETURN(config.worker_targets, coordinator::ParseTargetList(config.worker_spec));
  if (!config.local && config.worker_targets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--worker '%s' names no target", config.worker_spec));
  }
  ASSIGN_OR_RETURN(config.draft_targets, coordinator::ParseTargetList(config.draft_spec));
  config.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
  return absl::OkStatus();
}

// --step-timeout-s, --step-timeout-floor-ms and --suspect-after-ms.
absl::Status ReadStepPaceFlags(CoordinatorConfig& config) {
  const std::pair<const char*, int32_t> flags[] = {
      {"--step-timeout-s", absl::GetFlag(FLAGS_step_timeout_s)},
      {"--step-timeout-floor-ms", absl::GetFlag(FLAGS_step_timeout_floor_ms)},
      {"--suspect-after-ms", absl::GetFlag(FLAGS_suspect_after_ms)}};
  for (const auto& [name, value] : flags) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s %d is out of range: must be >= 1", name, value));
    }
  }
  config.step_pace.initial_deadline = absl::Seconds(absl::GetFlag(FLAGS_step_timeout_s));
  config.step_pace.deadline_floor = absl::Milliseconds(absl::GetFlag(FLAGS_step_timeout_floor_ms));
  config.step_pace.suspect_floor = absl::Milliseconds(absl::GetFlag(FLAGS_suspect_after_ms));
  return coordinator::ValidateStepPaceConfig(config.step_pace);
}

// --max-migrations and --migration-timeout-ms, then the step deadlines.
absl::Status ReadMigrationFlags(CoordinatorConfig& config) {
  config.max_migrations = absl::GetFlag(FLAGS_max_migrations);
  if (config.max_migrations < 0 || config.max_migrations > 100) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-migrations %d is out of range: must be in [0, 100]", config.max_migrations));
  }
  const int32_t timeout_ms = absl::GetFlag(FLAGS_migration_timeout_ms);
  if (timeout_ms < 0 || timeout_ms > 600000) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--migration-timeout-ms %d is out of range: must be in [0, 600000]", timeout_ms));
  }
  config.migration_timeout = absl::Milliseconds(timeout_ms);
  return ReadStepPaceFlags(config);
}

// The scheduler's flags, the --local worker group's and the --block-size range.
absl::Status ReadSchedulingFlags(CoordinatorConfig& config) {
  config.scheduler.max_num_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens);
  config.scheduler.max_num_seqs = absl::GetFlag(FLAGS_max_seqs);
  config.scheduler.enable_prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
  RETURN_IF_ERROR(coordinator::ValidateSchedulerConfig(config.scheduler));
  config.affinity_max_extra_load = absl::GetFlag(FLAGS_affinity_max_extra_load);
  RETURN_IF_ERROR(ReadMigrationFlags(config));
  config.threads = absl::GetFlag(FLAGS_threads);
  config.block_size = absl::GetFlag(FLAGS_block_size);
  config.kv_blocks = absl::GetFlag(FLAGS_kv_blocks);
  config.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_bytes);
  if (config.local && (config.block_size < 1 || config.block_size > 1024)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--block-size %d is out of range: must be in [1, 1024]", config.block_size));
  }
  return absl::OkStatus();
}

// --num-speculative-tokens, --speculative (which excludes --draft),
// --draft-timeout-ms and --max-draft-prefill-tokens.
absl::Status ReadSpeculationFlags(CoordinatorConfig& config) {
  ASSIGN_OR_RETURN(config.speculation.num_speculative_tokens,
                   coordinator::ParseNumSpeculativeTokens(
                       absl::GetFlag(FLAGS_num_speculative_tokens)));
  const std::string speculative = absl::GetFlag(FLAGS_speculative);
  if (!speculative.empty() && !config.draft_targets.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--speculative %s and --draft %s both choose the draft: give one", speculative,
        config.draft_spec));
  }
  const int32_t draft_timeout_ms = absl::GetFlag(FLAGS_draft_timeout_ms);
  if (draft_timeout_ms < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--draft-timeout-ms %d is out of range: must be >= 1", draft_timeout_ms));
  }
  config.draft_timeout = absl::Milliseconds(draft_timeout_ms);
  const int32_t prefill = absl::GetFlag(FLAGS_max_draft_prefill_tokens);
  if (prefill < 1 || prefill > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-draft-prefill-tokens %d is out of range: must be in [1, 1048576]", prefill));
  }
  config.speculation.max_draft_prefill_tokens = prefill;
  if (!speculative.empty()) {
    ASSIGN_OR_RETURN(config.speculative, draft::ParseSpeculativeSpec(speculative));
  }
  return absl::OkStatus();
}

// --http-port, --http-threads, the HTTP limits and --served-model-name.
absl::Status ReadHttpFlags(CoordinatorConfig& config) {
  config.http_port = absl::GetFlag(FLAGS_http_port);
  if (config.http_port < -1 || config.http_port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--http-port %d is out of range: must be in [-1, 65535]", config.http_port));
  }
  config.http_threads = absl::GetFlag(FLAGS_http_threads);
  if (config.http_threads < 1 || config.http_threads > 64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--http-threads %d is out of range: must be in [1, 64]", config.http_threads));
  }
  const int64_t body = absl::GetFlag(FLAGS_http_max_body_bytes);
  const int64_t header = absl::GetFlag(FLAGS_http_max_header_bytes);
  const int32_t idle_s = absl::GetFlag(FLAGS_http_idle_timeout_s);
  const int32_t write_s = absl::GetFlag(FLAGS_http_write_timeout_s);
  if (body < 1024 || body > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--http-max-body-bytes %d is out of range: must be in [1024, 1073741824]", body));
  }
  if (header < 1024 || header > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--http-max-header-bytes %d is out of range: must be in [1024, 1048576]", header));
  }
  if (idle_s < 1 || idle_s > 86400 || write_s < 1 || write_s > 86400) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--http-idle-timeout-s %d and --http-write-timeout-s %d must be in [1, 86400]", idle_s,
        write_s));
  }
  config.http_limits.max_body_bytes = static_cast<size_t>(body);
  config.http_limits.max_header_bytes = static_cast<size_t>(header);
  config.http_limits.idle_timeout = absl::Seconds(idle_s);
  config.http_limits.write_timeout = absl::Seconds(write_s);
  config.http_limits.max_connections = absl::GetFlag(FLAGS_http_max_connections);
  if (config.http_limits.max_connections < 1 || config.http_limits.max_connections > 1000000) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--http-max-connections %d is out of range: must be in [1, 1000000]",
        config.http_limits.max_connections));
  }
  config.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  ASSIGN_OR_RETURN(config.api_key, ApiKey::FromFlags(absl::GetFlag(FLAGS_api_key),
                                                     absl::GetFlag(FLAGS_api_key_file)));
  config.metrics_need_key = absl::GetFlag(FLAGS_api_key_metrics);
  config.chat_control_tokens_in_content = absl::GetFlag(FLAGS_chat_control_tokens_in_content);
  ASSIGN_OR_RETURN(ApiKey cluster_key,
                   ApiKey::FromFlags("", absl::GetFlag(FLAGS_cluster_key_file)));
  config.cluster_key = cluster_key.required() ? cluster_key.key() : config.api_key.key();
  if (const std::string ca = absl::GetFlag(FLAGS_internal_tls_ca); !ca.empty()) {
    ASSIGN_OR_RETURN(config.internal_tls_ca_pem, ReadTlsCaFile(ca, "--internal-tls-ca"));
  }
  return absl::OkStatus();
}

// --tls-cert and --tls-key: both or neither, the files read and the key
// checked against the certificate now, before any model is loaded.
absl::Status ReadTlsFlags(CoordinatorConfig& config) {
  ASSIGN_OR_RETURN(config.tls, TlsCredentials::FromFiles(absl::GetFlag(FLAGS_tls_cert),
                                                         absl::GetFlag(FLAGS_tls_key)));
  return absl::OkStatus();
}

// Reads and validates every flag; INVALID_ARGUMENT naming the first bad one.
absl::StatusOr<CoordinatorConfig> ReadConfig() {
  CoordinatorConfig config;
  RETURN_IF_ERROR(ReadServingFlags(config));
  RETURN_IF_ERROR(ReadHttpFlags(config));
  RETURN_IF_ERROR(ReadTlsFlags(config));
  RETURN_IF_ERROR(ReadSchedulingFlags(config));
  RETURN_IF_ERROR(ReadSpeculationFlags(config));
  return config;
}

// Everything the coordinator runs. Members are declared in the order they
// are built, so that destruction (reverse) takes each down before what it
// uses: discovery before the pool it updates, the pool (its scheduler
// threads) before the service they report to and the --local model.
struct Coordinator {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<model::Model> model;  // --local only
  std::unique_ptr<coordinator::DraftWorkerSet> drafts;
  std::unique_ptr<coordinator::RequestAdmission> admission;
  std::unique_ptr<coordinator::InferenceService> service;
  std::unique_ptr<coordinator::http::OpenAiApi> http_api;
  std::unique_ptr<coordinator::http::ServingMetrics> metrics;  // outlives the pool's reports
  std::unique_ptr<WorkerGroupPool> pool;
  std::unique_ptr<coordinator::Discovery> worker_discovery;  // --worker only
  std::unique_ptr<coordinator::Discovery> draft_discovery;   // --draft only

  // Stops discovery and joins every scheduler thread; call once no request
  // is in flight (the server drained). Idempotent.
  void Stop() {
    if (worker_discovery != nullptr) worker_discovery->Shutdown();
    if (draft_discovery != nullptr) draft_discovery->Shutdown();
    pool.reset();
  }
  ~Coordinator() { Stop(); }
};

// The served model's tokenizer, from the GGUF at `model_path`.
absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(
    const std::string& model_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(model_path));
  ASSIGN_OR_RETURN(tokenizer::Vocab vocab, tokenizer::LoadVocabFromGguf(*file));
  return tokenizer::Tokenizer::Create(std::move(vocab));
}

// The in-process group of --local mode (the model is kept alive beside it).
absl::StatusOr<WorkerGroupPool::Connected> MakeLocalGroup(
    const CoordinatorConfig& config, const tokenizer::Tokenizer& tok,
    std::unique_ptr<model::Model>* model_out) {
  model::ModelOptions model_options;
  model_options.num_threads = config.threads;
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> model,
                   model::Model::Load(config.model_path, model_options));
  worker::StepExecutorConfig exec_config;
  exec_config.block_size = config.block_size;
  exec_config.eos_token_ids = tok.EndOfGenerationIds();
  ASSIGN_OR_RETURN(exec_config.num_blocks,
                   model::NumKvBlocks(*model, config.block_size, config.kv_blocks,
                                      config.kv_cache_bytes));
  ASSIGN_OR_RETURN(std::unique_ptr<coordinator::LocalWorkerGroup> group,
                   coordinator::LocalWorkerGroup::Create(model.get(), exec_config));
  *model_out = std::move(model);
  return WorkerGroupPool::Connected{std::move(group), nullptr};
}

// The pool's connector: connects a tandem-worker group with the config's
// step deadlines, over TLS with --internal-tls-ca, presenting the cluster
// key (--cluster-key-file, else the coordinator's own --api-key, if any) on
// every call to it.
WorkerGroupPool::Connector RemoteConnector(const CoordinatorConfig& config) {
  coordinator::GrpcWorkerGroupOptions options;
  options.api_key = config.cluster_key;
  options.pace = config.step_pace;
  options.tls_ca_pem = config.internal_tls_ca_pem;
  return [options](const std::string& address,
                   absl::Duration timeout) -> absl::StatusOr<WorkerGroupPool::Connected> {
    ASSIGN_OR_RETURN(std::unique_ptr<coordinator::GrpcWorkerGroup> group,
                     coordinator::GrpcWorkerGroup::Connect(address, timeout, options));
    coordinator::GrpcWorkerGroup* remote = group.get();
    return WorkerGroupPool::Connected{std::move(group), remote};
  };
}

using NamedGroup = std::pair<std::string, WorkerGroupPool::Connected>;

// Start-up: resolves `discovery`'s targets and connects until one group
// answers (the model's geometry comes from it), within `timeout`. The
// others are connected by the pool's first Reconcile.
absl::StatusOr<NamedGroup> ConnectFirst(coordinator::Discovery& discovery,
                                        const WorkerGroupPool::Connector& connect,
                                        absl::Duration timeout, const std::string& spec) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::NotFoundError("no address resolved");
  while (true) {
    for (const std::string& address : discovery.Resolve()) {
      absl::Duration left = std::max(deadline - absl::Now(), absl::Milliseconds(100));
      absl::StatusOr<WorkerGroupPool::Connected> c =
          connect(address, std::min(left, absl::Seconds(5)));
      if (c.ok()) return std::make_pair(address, *std::move(c));
      last = c.status();
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::UnavailableError(absl::StrFormat(
      "no worker group of --worker '%s' answered within %s; last error: %s", spec,
      absl::FormatDuration(timeout), last.ToString()));
}

// The first worker group, which fixes the served model's geometry (every
// later one must match it, WorkerGroupPool::Add): the in-process one with
// --local (loading c.model), else the first --worker target to answer (c's
// worker discovery is created for that, not started).
absl::StatusOr<NamedGroup> FirstGroup(const CoordinatorConfig& config, Coordinator& c) {
  if (config.local) {
    ASSIGN_OR_RETURN(WorkerGroupPool::Connected group,
                     MakeLocalGroup(config, *c.tok, &c.model));
    return std::make_pair(std::string("local"), std::move(group));
  }
  const absl::Duration interval = config.resolve_interval;
  c.worker_discovery = std::make_unique<coordinator::Discovery>(
      "worker group", config.worker_targets, interval,
      [&c, interval](const std::vector<std::string>& addresses) {
        c.pool->Reconcile(addresses, std::min(interval, absl::Seconds(2)));
      });
  return ConnectFirst(*c.worker_discovery, RemoteConnector(config), config.connect_timeout,
                      config.worker_spec);
}

// The deployment's draft pools: one per scheduler thread, from the draft
// workers (--draft), from a proposer in this process (--speculative; its
// kind goes to `local_draft_kind`) or none (null maker).
using DraftPoolMaker = std::function<std::unique_ptr<coordinator::DraftPool>()>;

absl::StatusOr<DraftPoolMaker> DeploymentDraftPools(
    const CoordinatorConfig& config, const coordinator::WorkerGroupInfo& info,
    const tokenizer::Tokenizer& tok, coordinator::DraftWorkerSet* drafts,
    std::string* local_draft_kind) {
  if (!config.draft_targets.empty()) {
    const absl::Duration timeout = config.draft_timeout;
    return DraftPoolMaker([drafts, timeout] {
      return std::unique_ptr<coordinator::DraftPool>(
          std::make_unique<coordinator::GrpcDraftPool>(drafts, timeout));
    });
  }
  if (!config.speculative.has_value()) return DraftPoolMaker();
  draft::ProposerOptions po;
  po.spec = *config.speculative;
  po.target_model_path = config.model_path;
  po.block_size = info.block_size;
  po.eos_token_ids = tok.EndOfGenerationIds();
  // Fail at start-up, not on the first request.
  ASSIGN_OR_RETURN(std::unique_ptr<draft::Proposer> probe, draft::MakeProposer(po));
  *local_draft_kind = draft::DraftKindOfName(probe->info().name);
  return DraftPoolMaker([po] {
    absl::StatusOr<std::unique_ptr<draft::Proposer>> p = draft::MakeProposer(po);
    CHECK(p.ok(), "draft %s failed to load a second time: %s",
          draft::FormatSpeculativeSpec(po.spec), p.status().ToString());
    return std::unique_ptr<coordinator::DraftPool>(
        std::make_unique<coordinator::LocalDraftPool>(*std::move(p)));
  });
}

// Builds the service and the pool of worker groups around the first group
// `first`; speculation uses the deployment's draft inside a DraftPoolSet
// that adds in-process n-gram drafting for requests naming "ngram".
absl::Status BuildPool(const CoordinatorConfig& config, NamedGroup first, Coordinator& c) {
  const coordinator::WorkerGroupInfo info = first.second.group->info();
  coordinator::RouterConfig router_config;
  router_config.block_size = info.block_size;
  router_config.affinity_max_extra_load = config.affinity_max_extra_load;
  RETURN_IF_ERROR(coordinator::ValidateRouterConfig(router_config));
  c.drafts =
      std::make_unique<coordinator::DraftWorkerSet>(c.tok->vocab_size(), config.cluster_key,
                                                    config.internal_tls_ca_pem);
  std::string local_draft_kind;
  ASSIGN_OR_RETURN(DraftPoolMaker deployment_pool,
                   DeploymentDraftPools(config, info, *c.tok, c.drafts.get(), &local_draft_kind));
  auto make_ngram = coordinator::NgramDraftPoolMaker(info.block_size, info.vocab_size,
                                                     c.tok->EndOfGenerationIds());
  WorkerGroupPool::DraftPoolFactory draft_pools = [deployment_pool, make_ngram] {
    return std::unique_ptr<coordinator::DraftPool>(std::make_unique<coordinator::DraftPoolSet>(
        deployment_pool ? deployment_pool() : nullptr, make_ngram));
  };
  c.admission = std::make_unique<coordinator::RequestAdmission>(c.tok.get(), info);
  c.service = std::make_unique<coordinator::InferenceService>(c.admission.get(), config.api_key);
  c.pool = std::make_unique<WorkerGroupPool>(config.scheduler, router_config, c.tok.get(),
                                             c.admission.get(),
                                             RemoteConnector(config),
                                             draft_pools, config.speculation);
  RETURN_IF_ERROR(c.pool->set_migration(config.max_migrations, config.migration_timeout));
  RETURN_IF_ERROR(c.pool->Add(first.first, std::move(first.second)));
  c.admission->set_pool(c.pool.get(), c.drafts.get());
  c.admission->set_local_draft_kind(local_draft_kind);
  c.admission->set_control_tokens_in_content(config.chat_control_tokens_in_content);
  coordinator::http::ApiOptions api;
  // vLLM names the model after its --model; here the GGUF's file name.
  api.served_model_name = config.served_model_name.empty()
                              ? std::filesystem::path(config.model_path).stem().string()
                              : config.served_model_name;
  c.metrics = std::make_unique<coordinator::http::ServingMetrics>(
      api.served_model_name, info.block_size, c.pool.get(), c.drafts.get());
  c.admission->set_metrics(c.metrics.get());
  api.metrics = [metrics = c.metrics.get()] { return metrics->Render(); };
  api.api_key = config.api_key;
  api.metrics_need_key = config.metrics_need_key;
  c.http_api = std::make_unique<coordinator::http::OpenAiApi>(c.admission.get(), api);
  return absl::OkStatus();
}

// Starts re-resolving the --draft and --worker targets.
void StartDiscovery(const CoordinatorConfig& config, Coordinator& c) {
  if (!config.draft_targets.empty()) {
    const absl::Duration interval = config.resolve_interval;
    coordinator::DraftWorkerSet* drafts = c.drafts.get();
    c.draft_discovery = std::make_unique<coordinator::Discovery>(
        "draft worker", config.draft_targets, interval,
        [drafts, interval](const std::vector<std::string>& addresses) {
          drafts->Reconcile(addresses, std::min(interval, absl::Seconds(2)));
        });
    c.draft_discovery->Start();
  }
  if (c.worker_discovery != nullptr) c.worker_discovery->Start();
}

// Builds everything `c` holds, ready to serve: the tokenizer, the first
// worker group, the pool, the service, and discovery running.
absl::Status BuildCoordinator(const CoordinatorConfig& config, Coordinator& c) {
  ASSIGN_OR_RETURN(c.tok, LoadTokenizer(config.model_path));
  ASSIGN_OR_RETURN(NamedGroup first, FirstGroup(config, c));
  RETURN_IF_ERROR(BuildPool(config, std::move(first), c));
  StartDiscovery(config, c);
  return absl::OkStatus();
}

// Serves Inference (gRPC) and the HTTP API until SIGTERM or SIGINT, then
// drains: /ready turns 503 and the service stops admitting, in-flight gRPC
// streams and HTTP exchanges get kDrainGrace, and `c` stops. Prints the gRPC
// address line first (what launchers wait for), then the HTTP one. The
// process exit code.
int Serve(const CoordinatorConfig& config, Coordinator& c) {
  std::unique_ptr<HttpServer> http;
  if (config.http_port >= 0) {
    absl::StatusOr<std::unique_ptr<HttpServer>> started_http =
        HttpServer::Start(config.host, config.http_port, c.http_api.get(), config.http_limits,
                          config.http_threads, config.tls);
    if (!started_http.ok()) return Fail(started_http.status());
    http = *std::move(started_http);
  }
  absl::StatusOr<GrpcServer> started =
      StartGrpcServer(config.host, config.port, {c.service.get()}, {kServiceName}, config.tls);
  if (!started.ok()) return Fail(started.status());
  AnnounceListening(kProcess, started->address);
  if (http != nullptr) AnnounceListening(absl::StrCat(kProcess, " HTTP"), http->address());
  absl::Time drain_start = absl::InfiniteFuture();
  ServeUntilShutdownSignal(kProcess, *started->server, kDrainGrace, [&c, &drain_start] {
    drain_start = absl::Now();
    c.admission->StopAdmitting();
  });
  if (http != nullptr) {
    if (!http->WaitForExchanges(drain_start + kDrainGrace)) {
      std::fprintf(stderr, "%s: %lld HTTP requests still open after the drain grace; closing\n",
                   kProcess, static_cast<long long>(http->num_open_exchanges()));
    }
    http->Stop();
  }
  c.Stop();
  std::fprintf(stderr, "%s: stopped\n", kProcess);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BlockShutdownSignals();
  RaiseOpenFileLimit();
  const Program program{
      kProcess,
      {{"", "--model M.gguf (--worker TARGET[,TARGET...] | --local) [flags]",
        "The public Inference gRPC server and OpenAI-compatible HTTP API of a tandem cluster",
        FlagsDefinedIn(__FILE__)}}};
  ParseCommandLineOrExit(program, argc, argv);
  absl::StatusOr<CoordinatorConfig> config = ReadConfig();
  if (!config.ok()) return Fail(config.status());
  Coordinator coordinator;
  if (absl::Status s = BuildCoordinator(*config, coordinator); !s.ok()) return Fail(s);
  return Serve(*config, coordinator);
}
