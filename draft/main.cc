// tandem-draft: a draft worker for speculative decoding. It loads a GGUF
// model with its own paged KV cache and serves tandem.v1.Draft (Propose γ
// tokens with their probabilities, Release / roll back), grpc.health.v1 and
// server reflection:
//   tandem-draft --model PATH [--host 127.0.0.1] [--port 0] [--kv-cache-bytes N]
//                [--block-size 16] [--threads 0] [--precision fast|reference]
// Once serving it prints exactly one line "tandem-draft listening on
// HOST:PORT" (the real port when --port 0) to stdout.
//
// Thread model: SIGTERM/SIGINT are blocked in every thread before any exists
// (sigwait() takes them; no handler runs asynchronously). The main thread
// parses flags, loads the model, starts the gRPC server and waits in
// sigwait(). gRPC's synchronous server threads run the handlers;
// DraftService serializes Propose/Release with its mutex, and each forward
// runs on the model's thread pool (--threads).
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
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/command_line.h"
#include "draft/draft_service.h"
#include "draft/model_proposer.h"
#include "engine/model/kv_budget.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

ABSL_FLAG(std::string, model, "", "Path of the draft GGUF model");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on");
ABSL_FLAG(int32_t, port, 0, "Port to listen on (0: the OS picks one; the real port is printed)");
ABSL_FLAG(int64_t, kv_cache_bytes, 256ll << 20, "Draft KV cache capacity in bytes");
ABSL_FLAG(int32_t, block_size, 16, "Tokens per KV block");
ABSL_FLAG(int32_t, threads, 0, "Threads for one forward (0 = every core)");
ABSL_FLAG(std::string, precision, "fast", "fast (quantized kernels, f16 KV) or reference (f32)");

namespace {

constexpr char kServiceName[] = "tandem.v1.Draft";
constexpr int kMaxMessageBytes = 256 << 20;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "tandem-draft: %s\n", status.ToString().c_str());
  return 1;
}

std::string HostPort(const std::string& host, int port) {
  return absl::StrFormat(host.find(':') != std::string::npos ? "[%s]:%d" : "%s:%d", host, port);
}

}  // namespace

int main(int argc, char** argv) {
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGTERM);
  sigaddset(&shutdown_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);

  absl::SetProgramUsageMessage(
      "tandem-draft --model PATH [--host H] [--port P] [--kv-cache-bytes N] [--block-size N] "
      "[--threads N] [--precision fast|reference]");
  tandem::NormalizedArgs normalized_args(argc, argv);
  std::vector<char*> args = absl::ParseCommandLine(normalized_args.argc(), normalized_args.argv());
  if (args.size() != 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("unexpected argument '%s': tandem-draft takes flags only", args[1])));
  }
  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (model_path.empty()) return Fail(absl::InvalidArgumentError("--model is required"));
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

  absl::StatusOr<std::unique_ptr<tandem::model::Model>> model =
      tandem::model::Model::Load(model_path, model_options);
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<tandem::tokenizer::Vocab> vocab =
      tandem::tokenizer::LoadVocabFromGguf((*model)->file());
  if (!vocab.ok()) return Fail(vocab.status());
  absl::StatusOr<std::unique_ptr<tandem::tokenizer::Tokenizer>> tokenizer =
      tandem::tokenizer::Tokenizer::Create(*vocab);
  if (!tokenizer.ok()) return Fail(tokenizer.status());

  absl::StatusOr<int32_t> num_blocks = tandem::model::NumKvBlocks(
      **model, block_size, /*kv_blocks=*/0, absl::GetFlag(FLAGS_kv_cache_bytes));
  if (!num_blocks.ok()) return Fail(num_blocks.status());
  tandem::draft::ModelProposerConfig config;
  config.num_blocks = *num_blocks;
  config.block_size = block_size;
  config.eos_token_ids = (*tokenizer)->EndOfGenerationIds();
  const std::string model_name = (*model)->config().name;
  absl::StatusOr<std::unique_ptr<tandem::draft::ModelProposer>> proposer =
      tandem::draft::ModelProposer::Create(std::move(*model), config);
  if (!proposer.ok()) return Fail(proposer.status());
  tandem::draft::DraftService service(std::move(*proposer));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int selected_port = 0;
  const std::string listen = HostPort(host, port);
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &selected_port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || selected_port == 0) {
    return Fail(absl::UnavailableError(absl::StrFormat("cannot listen on %s", listen)));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus(kServiceName, true);
  std::fprintf(stderr, "tandem-draft: model %s, %d KV blocks of %d tokens, precision %s\n",
               model_name.c_str(), *num_blocks, block_size, precision.c_str());
  std::printf("tandem-draft listening on %s\n", HostPort(host, selected_port).c_str());
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
