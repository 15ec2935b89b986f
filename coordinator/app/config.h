// The coordinator's command line: its flags (config.cc) read and validated
// into a CoordinatorConfig before the model or a worker is touched.
#ifndef TANDEM_COORDINATOR_APP_CONFIG_H_
#define TANDEM_COORDINATOR_APP_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/api_key.h"
#include "common/http/http_session.h"
#include "common/tls/tls_credentials.h"
#include "coordinator/cluster/target_resolver.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "coordinator/scheduler/scheduler.h"
#include "draft/api/speculative_spec.h"

namespace tandem::coordinator::app {

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

// Reads every flag; INVALID_ARGUMENT naming the first bad one, its value
// and the limit.
absl::StatusOr<CoordinatorConfig> ReadConfig();

// The file that defines the coordinator's flags, as the compiler named it
// (what FlagsDefinedIn, common/flags/flag_help.h, matches).
const char* ConfigFlagsFile();

}  // namespace tandem::coordinator::app

#endif  // TANDEM_COORDINATOR_APP_CONFIG_H_
