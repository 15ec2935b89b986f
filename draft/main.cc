// tandem-draft: a draft worker for speculative decoding. It serves
// tandem.v1.Draft (Propose up to γ tokens with their probabilities, Release /
// roll back), grpc.health.v1 and server reflection, drafting with one kind:
//   tandem-draft [--speculative model|ngram|layer-skip:L] [--model PATH]
//                [--host 127.0.0.1] [--port 0] [--kv-cache-bytes N]
//                [--kv-blocks N] [--block-size 16] [--threads 0]
//                [--precision fast|reference]
//                [--ngram-min 1] [--ngram-max 4] [--vocab-size N]
//                [--device cpu|cuda] [--cuda-weights bf16|native] [--gpus N]
//                [--cuda-graphs] [--gpu-memory-fraction F] [--max-batched-tokens 2048]
//   (the engine flags: engine/options/engine_flags.h; proposals are sampled
//   on the host whatever --cuda-sampling says)
//   model         (default) a draft GGUF at --model (or model:PATH) with its
//                 own paged KV cache (--kv-cache-bytes, --block-size)
//   layer-skip:L  the first L layers of the TARGET's GGUF at --model, then its
//                 final norm and head; its KV cache holds only L layers
//   ngram         prompt lookup over each sequence's tokens (suffixes of
//                 --ngram-min..--ngram-max tokens); no model is loaded, so
//                 --model is optional: given, the vocabulary size and context
//                 length are read from its metadata; otherwise --vocab-size
//                 (the target's) is required. The KV and precision flags do
//                 not apply.
// Draft.Info's model_name reports the kind: the model's name, "layer-skip:L:
// <target name>" or "ngram".
// Once serving it prints exactly one line "tandem-draft listening on
// HOST:PORT" (the real port when --port 0) to stdout.
//
// Thread model: SIGTERM/SIGINT are blocked in every thread before any exists
// (sigwait() takes them; no handler runs asynchronously). The main thread
// parses flags, builds the proposer (loading the model), starts the gRPC
// server and waits in sigwait(). gRPC's synchronous server threads run the
// handlers; DraftService serializes Propose/Release with its mutex, and each
// forward runs on the model's thread pool (--threads).
// On SIGTERM/SIGINT: health → NOT_SERVING, Propose refuses new work, the
// server shuts down with a 5 s deadline (in-flight calls finish or are
// cancelled), and the process exits 0.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/api_key.h"
#include "common/flags/flag_help.h"
#include "common/grpc/grpc_server.h"
#include "common/grpc/server_lifecycle.h"
#include "common/metrics/process_metrics.h"
#include "common/status_macros.h"
#include "common/tls/tls_credentials.h"
#include "draft/api/proposer.h"
#include "draft/api/speculative_spec.h"
#include "draft/draft_service.h"
#include "draft/proposer_factory.h"
#include "engine/options/engine_flags.h"

ABSL_FLAG(std::string, speculative, "model",
          "Draft kind: model (the GGUF at --model), layer-skip:L (the first L layers of the "
          "target GGUF at --model) or ngram (prompt lookup, no model)");
ABSL_FLAG(std::string, model, "",
          "GGUF: the draft model (model), the target (layer-skip); optional for ngram (its "
          "vocabulary size and context length are read from it)");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on");
ABSL_FLAG(std::string, api_key, "",
          "Require this key (\"authorization: Bearer KEY\") on every Draft call; the "
          "coordinator sends its own --api-key, so give both the same key");
ABSL_FLAG(std::string, api_key_file, "", "--api-key read from this file (whitespace trimmed)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: the gRPC port speaks TLS 1.2+ only (the coordinator then "
          "needs --internal-tls-ca); empty: plaintext");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert (unencrypted)");
ABSL_FLAG(int32_t, port, 0, "Port to listen on (0: the OS picks one; the real port is printed)");
ABSL_FLAG(int32_t, metrics_port, -1,
          "Serve Prometheus /metrics (and /health) over HTTP on this port (0: the OS picks "
          "one, printed; -1: off)");
ABSL_FLAG(int32_t, max_batched_tokens, 2048,
          "--device cuda: most tokens of one draft forward (device scratch is sized for it)");
ABSL_FLAG(int32_t, ngram_min, 1, "ngram: shortest suffix looked up, in tokens");
ABSL_FLAG(int32_t, ngram_max, 4, "ngram: longest suffix looked up (longer matches win)");
ABSL_FLAG(int32_t, vocab_size, 0,
          "ngram without --model: the target's vocabulary size (Info reports it; tokens must be "
          "below it)");

namespace {

using namespace tandem;  // NOLINT: a main file

constexpr char kProcess[] = "tandem-draft";
constexpr char kServiceName[] = "tandem.v1.Draft";
// In-flight Propose / Release calls get this long after SIGTERM.
constexpr absl::Duration kDrainGrace = absl::Seconds(5);

// A draft's engine: a smaller KV cache and GPU share than a target's; its
// proposals are sampled on the host.
engine::EngineRole DraftRole() {
  return {.default_kv_cache_bytes = 256ll << 20,
          .default_gpu_memory_fraction = 0.2,
          .max_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens),
          .host_sampling_only = true};
}

// Everything the flags say, validated before anything is loaded.
struct DraftConfig {
  std::string host;
  int32_t port = 0;
  ApiKey api_key;  // required on Draft calls when set
  TlsCredentials tls;  // the gRPC port's identity (--tls-cert / --tls-key); default plaintext
  std::string precision;  // "fast" or "reference", as given (for the log)
  draft::ProposerOptions proposer;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", kProcess, status.ToString().c_str());
  return 1;
}

// The GGUF to load: --model, or the PATH of --speculative model:PATH (they
// must agree when both are given); "" only for ngram, which needs none.
absl::StatusOr<std::string> DraftModelPath(const draft::SpeculativeSpec& spec) {
  std::string model_path = absl::GetFlag(FLAGS_model);
  if (!spec.model_path.empty()) {
    if (!model_path.empty() && model_path != spec.model_path) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--speculative model:%s and --model %s name different draft models: give one",
          spec.model_path, model_path));
    }
    model_path = spec.model_path;
  }
  if (model_path.empty() && spec.kind != draft::ProposerKind::kNgram) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--model is required for --speculative %s (%s)", absl::GetFlag(FLAGS_speculative),
        spec.kind == draft::ProposerKind::kLayerSkip ? "the target's GGUF" : "the draft GGUF"));
  }
  return model_path;
}

// Reads and validates every flag; INVALID_ARGUMENT naming the first bad one.
absl::StatusOr<DraftConfig> ReadConfig() {
  DraftConfig config;
  ASSIGN_OR_RETURN(config.proposer.spec,
                   draft::ParseSpeculativeSpec(absl::GetFlag(FLAGS_speculative)));
  ASSIGN_OR_RETURN(config.proposer.target_model_path, DraftModelPath(config.proposer.spec));
  config.host = absl::GetFlag(FLAGS_host);
  if (config.host.empty()) return absl::InvalidArgumentError("--host is empty");
  config.port = absl::GetFlag(FLAGS_port);
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--port %d is out of range: must be in [0, 65535]", config.port));
  }
  ASSIGN_OR_RETURN(config.tls, TlsCredentials::FromFiles(absl::GetFlag(FLAGS_tls_cert),
                                                         absl::GetFlag(FLAGS_tls_key)));
  ASSIGN_OR_RETURN(config.api_key, ApiKey::FromFlags(absl::GetFlag(FLAGS_api_key),
                                                     absl::GetFlag(FLAGS_api_key_file)));
  ASSIGN_OR_RETURN(const engine::EngineOptions engine, engine::EngineOptionsFromFlags(DraftRole()));
  config.precision = engine.precision;
  config.proposer.model_options = engine.model;
  config.proposer.block_size = engine.block_size;
  config.proposer.kv_blocks = engine.kv_blocks;
  config.proposer.kv_cache_bytes = engine.kv_cache_bytes;
  config.proposer.device = engine.device;
  config.proposer.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  config.proposer.ngram_min_n = absl::GetFlag(FLAGS_ngram_min);
  config.proposer.ngram_max_n = absl::GetFlag(FLAGS_ngram_max);
  return config;
}

// One stderr line describing the draft being served.
void LogProposer(const draft::ProposerInfo& info, const DraftConfig& config) {
  if (info.kind == draft::ProposerKind::kNgram) {
    std::fprintf(stderr, "%s: %s (suffixes of %d..%d tokens), vocabulary %d, up to %d "
                 "sequences\n", kProcess, info.name.c_str(), config.proposer.ngram_min_n,
                 config.proposer.ngram_max_n, info.vocab_size, info.max_sequences);
  } else {
    std::fprintf(stderr, "%s: %s %s, %d KV blocks of %d tokens, precision %s\n", kProcess,
                 std::string(draft::ProposerKindName(info.kind)).c_str(), info.name.c_str(),
                 info.max_sequences, config.proposer.block_size, config.precision.c_str());
  }
}

// Builds the proposer (loading its model), serves Draft until SIGTERM or
// SIGINT and drains. The process exit code: 0 after a drain, 1 when the
// proposer or the server cannot start.
int Serve(const DraftConfig& config) {
  absl::StatusOr<std::unique_ptr<draft::Proposer>> proposer =
      draft::MakeProposer(config.proposer);
  if (!proposer.ok()) return Fail(proposer.status());
  const draft::ProposerInfo info = (*proposer)->info();
  draft::DraftService service(*std::move(proposer));
  ProcessMetrics metrics("tandem:draft", ModelNameLabel(config.proposer.target_model_path));
  service.set_metrics(&metrics);
  service.set_api_key(config.api_key);
  absl::StatusOr<std::unique_ptr<HttpServer>> metrics_server = ServeProcessMetrics(
      &metrics, kProcess, config.host, absl::GetFlag(FLAGS_metrics_port));
  if (!metrics_server.ok()) return Fail(metrics_server.status());
  absl::StatusOr<GrpcServer> started =
      StartGrpcServer(config.host, config.port, {&service}, {kServiceName}, config.tls);
  if (!started.ok()) return Fail(started.status());
  LogProposer(info, config);
  AnnounceListening(kProcess, started->address);
  ServeUntilShutdownSignal(kProcess, *started->server, kDrainGrace,
                           [&service] { service.SetServing(false); });
  std::fprintf(stderr, "%s: stopped\n", kProcess);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BlockShutdownSignals();
  RaiseOpenFileLimit();
  const Program program{
      kProcess,
      {{"", "[--speculative model|ngram|layer-skip:L] [--model PATH] [flags]",
        "A draft worker for speculative decoding: serves tandem.v1.Draft",
        FlagsDefinedIn({__FILE__, engine::EngineFlagsFile()})}}};
  engine::SetEngineFlagDefaults(DraftRole());
  ParseCommandLineOrExit(program, argc, argv);
  absl::StatusOr<DraftConfig> config = ReadConfig();
  if (!config.ok()) return Fail(config.status());
  return Serve(*config);
}
