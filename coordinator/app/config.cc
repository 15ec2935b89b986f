#include "coordinator/app/config.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

// The coordinator's flags (tandem-coordinator --help lists them).
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

namespace tandem::coordinator::app {
namespace {

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

}  // namespace

absl::StatusOr<CoordinatorConfig> ReadConfig() {
  CoordinatorConfig config;
  RETURN_IF_ERROR(ReadServingFlags(config));
  RETURN_IF_ERROR(ReadHttpFlags(config));
  RETURN_IF_ERROR(ReadTlsFlags(config));
  RETURN_IF_ERROR(ReadSchedulingFlags(config));
  RETURN_IF_ERROR(ReadSpeculationFlags(config));
  return config;
}

const char* ConfigFlagsFile() { return __FILE__; }

}  // namespace tandem::coordinator::app
