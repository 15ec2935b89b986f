// tandem-draft: a draft worker for speculative decoding. It serves
// tandem.v1.Draft (Propose up to γ tokens with their probabilities, Release /
// roll back), grpc.health.v1 and server reflection, drafting with one kind:
//   tandem-draft [--speculative model|ngram|layer-skip:L] [--model PATH]
//                [--host 127.0.0.1] [--port 0] [--kv-cache-bytes N]
//                [--block-size 16] [--threads 0] [--precision fast|reference]
//                [--ngram-min 1] [--ngram-max 4] [--vocab-size N]
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
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/flag_help.h"
#include "common/grpc_server.h"
#include "draft/draft_service.h"
#include "draft/api/proposer.h"
#include "draft/proposer_factory.h"
#include "draft/api/speculative_spec.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/model.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

ABSL_FLAG(std::string, speculative, "model",
          "Draft kind: model (the GGUF at --model), layer-skip:L (the first L layers of the "
          "target GGUF at --model) or ngram (prompt lookup, no model)");
ABSL_FLAG(std::string, model, "",
          "GGUF: the draft model (model), the target (layer-skip); optional for ngram (its "
          "vocabulary size and context length are read from it)");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on");
ABSL_FLAG(int32_t, port, 0, "Port to listen on (0: the OS picks one; the real port is printed)");
ABSL_FLAG(int64_t, kv_cache_bytes, 256ll << 20, "Draft KV cache capacity in bytes");
ABSL_FLAG(int32_t, block_size, 16, "Tokens per KV block");
ABSL_FLAG(int32_t, threads, 0, "Threads for one forward (0 = every core)");
ABSL_FLAG(std::string, precision, "fast", "fast (quantized kernels, f16 KV) or reference (f32)");
ABSL_FLAG(int32_t, ngram_min, 1, "ngram: shortest suffix looked up, in tokens");
ABSL_FLAG(int32_t, ngram_max, 4, "ngram: longest suffix looked up (longer matches win)");
ABSL_FLAG(int32_t, vocab_size, 0,
          "ngram without --model: the target's vocabulary size (Info reports it; tokens must be "
          "below it)");

namespace {

constexpr char kServiceName[] = "tandem.v1.Draft";
int Fail(const absl::Status& status) {
  std::fprintf(stderr, "tandem-draft: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGTERM);
  sigaddset(&shutdown_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);

  const tandem::Program program{
      "tandem-draft",
      {{"", "[--speculative model|ngram|layer-skip:L] [--model PATH] [flags]",
        "A draft worker for speculative decoding: serves tandem.v1.Draft",
        tandem::FlagsDefinedIn(__FILE__)}}};
  tandem::ParseCommandLineOrExit(program, argc, argv);
  absl::StatusOr<tandem::draft::SpeculativeSpec> spec =
      tandem::draft::ParseSpeculativeSpec(absl::GetFlag(FLAGS_speculative));
  if (!spec.ok()) return Fail(spec.status());
  std::string model_path = absl::GetFlag(FLAGS_model);
  if (!spec->model_path.empty()) {
    if (!model_path.empty() && model_path != spec->model_path) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "--speculative model:%s and --model %s name different draft models: give one",
          spec->model_path, model_path)));
    }
    model_path = spec->model_path;
  }
  if (model_path.empty() && spec->kind != tandem::draft::ProposerKind::kNgram) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--model is required for --speculative %s (%s)", absl::GetFlag(FLAGS_speculative),
        spec->kind == tandem::draft::ProposerKind::kLayerSkip ? "the target's GGUF"
                                                              : "the draft GGUF")));
  }
  const std::string host = absl::GetFlag(FLAGS_host);
  if (host.empty()) return Fail(absl::InvalidArgumentError("--host is empty"));
  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--port %d is out of range: must be in [0, 65535]", port)));
  }
  const int32_t block_size = absl::GetFlag(FLAGS_block_size);
  if (block_size < 1 || block_size > tandem::kv::kMaxBlockSize) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--block-size %d is out of range: must be in [1, %d]", block_size,
        tandem::kv::kMaxBlockSize)));
  }
  const int32_t threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--threads %d is negative: must be >= 0 (0 = every core)", threads)));
  }
  tandem::model::ModelOptions model_options;
  model_options.num_threads = threads;
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision == "reference") {
    model_options.precision = tandem::model::Precision::kReference;
  } else if (precision != "fast") {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--precision '%s' must be fast or reference", precision)));
  }

  tandem::draft::ProposerOptions options;
  options.spec = *spec;
  options.target_model_path = model_path;
  options.model_options = model_options;
  options.block_size = block_size;
  options.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_bytes);
  options.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  options.ngram_min_n = absl::GetFlag(FLAGS_ngram_min);
  options.ngram_max_n = absl::GetFlag(FLAGS_ngram_max);
  absl::StatusOr<std::unique_ptr<tandem::draft::Proposer>> proposer =
      tandem::draft::MakeProposer(options);
  if (!proposer.ok()) return Fail(proposer.status());
  const tandem::draft::ProposerInfo info = (*proposer)->info();
  tandem::draft::DraftService service(std::move(*proposer));

  absl::StatusOr<tandem::GrpcServer> started =
      tandem::StartGrpcServer(host, port, {&service}, {kServiceName});
  if (!started.ok()) return Fail(started.status());
  std::unique_ptr<grpc::Server> server = std::move(started->server);
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (info.kind == tandem::draft::ProposerKind::kNgram) {
    std::fprintf(stderr, "tandem-draft: %s (suffixes of %d..%d tokens), vocabulary %d, up to %d "
                 "sequences\n", info.name.c_str(), options.ngram_min_n, options.ngram_max_n,
                 info.vocab_size, info.max_sequences);
  } else {
    std::fprintf(stderr, "tandem-draft: %s %s, %d KV blocks of %d tokens, precision %s\n",
                 std::string(tandem::draft::ProposerKindName(info.kind)).c_str(),
                 info.name.c_str(), info.max_sequences, block_size, precision.c_str());
  }
  std::printf("tandem-draft listening on %s\n", started->address.c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&shutdown_signals, &signal_number);
  std::fprintf(stderr, "tandem-draft: signal %d, draining\n", signal_number);
  health->SetServingStatus(false);
  service.SetServing(false);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  std::fprintf(stderr, "tandem-draft: stopped\n");
  return 0;
}
