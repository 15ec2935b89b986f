// tandem-worker: one rank of a target worker group. Alone it is a group of
// one; under mpirun (`mpirun -np N tandem-worker ...`) every process is one
// tensor-parallel rank holding its shard of the model and of the KV cache:
//   tandem-worker --model PATH [--host 127.0.0.1] [--port 0] [--kv-cache-bytes N | --kv-blocks N]
//                 [--block-size 16] [--threads 0] [--precision fast|reference]
//                 [--device cpu|cuda] [--cuda-weights bf16|native]
//                 [--gpu-memory-fraction 0.9] [--max-batched-tokens 2048] [--gpus 0,1,...]
//                 [--speculative ngram|layer-skip:L|model[:PATH]]
// Rank 0 serves tandem.v1.TargetWorker, grpc.health.v1 and server reflection
// and, once serving, prints exactly one line "tandem-worker listening on
// HOST:PORT" (the real port when --port 0) to stdout. Other ranks print none.
// With --speculative, rank 0 also serves tandem.v1.Draft on the same port
// (a draft of that kind beside the target, like a tandem-draft worker): the
// coordinator drafts with it when its --draft names this worker.
//
// Thread model: signals SIGTERM/SIGINT are blocked in every thread before any
// exists (sigwait() takes them; no handler runs asynchronously). MPI is
// initialized MPI_THREAD_FUNNELED only when a launcher started the process
// (else the group is one SingleProcessCommunicator), so only the main thread
// makes MPI calls.
//  - Group of one: the main thread parses flags, loads the model, starts the
//    gRPC server and waits in sigwait(). gRPC's synchronous server threads
//    run the handlers; TargetWorkerService serializes Step/Reset with its
//    mutex, and each forward runs on the model's thread pool (--threads).
//  - Rank 0 of N > 1: the same, except that the main thread runs an
//    MpiThreadQueue loop: handlers hand Step/Reset to it, and it broadcasts
//    the plan and runs the forward (whose all-reduces are collectives). A
//    separate thread sits in sigwait().
//  - Ranks != 0: the main thread loops receiving plan envelopes from rank 0
//    and running their shard's forward (no sampling, no gRPC), until rank 0
//    broadcasts SHUTDOWN; then it exits 0.
// On SIGTERM/SIGINT (to rank 0; mpirun forwards it): health → NOT_SERVING,
// Step refuses new work, the server shuts down with a 5 s deadline (in-flight
// steps finish or are cancelled), rank 0 broadcasts SHUTDOWN, every rank
// exits 0. A rank that fails after MPI is up aborts the whole group.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
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
#include "draft/api/speculative_spec.h"
#include "draft/draft_service.h"
#include "draft/proposer_factory.h"
#include "engine/device/model_runner_factory.h"
#include "engine/model/model.h"
#include "engine/options/engine_flags.h"
#include "engine/parallel/communicator.h"
#include "engine/parallel/mpi_communicator.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "grpcpp/grpcpp.h"
#include "worker/tp/mpi_thread_queue.h"
#include "worker/tp/step_broadcaster.h"
#include "worker/worker_service.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on");
ABSL_FLAG(int32_t, port, 0, "Port to listen on (0: the OS picks one; the real port is printed)");
ABSL_FLAG(std::string, api_key, "",
          "Require this key (\"authorization: Bearer KEY\") on every TargetWorker and Draft "
          "call; the coordinator sends its own --api-key, so give both the same key");
ABSL_FLAG(std::string, api_key_file, "", "--api-key read from this file (whitespace trimmed)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: the gRPC port speaks TLS 1.2+ only (the coordinator then "
          "needs --internal-tls-ca); empty: plaintext");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert (unencrypted)");
ABSL_FLAG(int32_t, metrics_port, -1,
          "Serve Prometheus /metrics (and /health) over HTTP on this port, rank 0 only (0: the "
          "OS picks one, printed; -1: off)");
ABSL_FLAG(int32_t, max_batched_tokens, 2048,
          "--device cuda: most tokens of one step (device scratch is sized for it)");
ABSL_FLAG(std::string, speculative, "",
          "Also serve tandem.v1.Draft on this port with a draft of this kind: ngram, "
          "layer-skip:L (this model's first L layers) or model[:PATH] (default: this model); "
          "the coordinator's --draft names this worker to use it");
ABSL_FLAG(int64_t, draft_kv_cache_bytes, 256ll << 20,
          "--speculative with a model: the draft's KV cache capacity in bytes");

namespace {

using namespace tandem;  // NOLINT: a main file

constexpr char kProcess[] = "tandem-worker";
// The service names health reports for, besides the overall "" entry.
constexpr char kServiceName[] = "tandem.v1.TargetWorker";
constexpr char kDraftServiceName[] = "tandem.v1.Draft";
// In-flight steps get this long after SIGTERM.
constexpr absl::Duration kDrainGrace = absl::Seconds(5);

// Set once this process is one rank of several: a failing rank then aborts
// the group, since the others would wait in a collective forever.
bool g_in_group = false;
int g_rank = 0;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s%s: %s\n", kProcess,
               g_in_group ? absl::StrFormat(" rank %d", g_rank).c_str() : "",
               status.ToString().c_str());
  if (g_in_group) MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

// Whether an MPI launcher (Open MPI's mpirun, or a PMI/PMIx one) started this
// process. Without one the worker never touches MPI: a group of one.
bool LaunchedByMpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

// This process's place in its worker group. `session` (null for a group of
// one) must outlive everything that communicates.
struct Group {
  std::unique_ptr<parallel::MpiSession> session;
  std::unique_ptr<parallel::Communicator> comm;
};

// Initializes MPI when a launcher started the process (it may consume its
// own arguments from argv), else a group of one; records the rank for Fail.
Group JoinGroup(int* argc, char*** argv) {
  Group group;
  if (LaunchedByMpi()) {
    group.session = std::make_unique<parallel::MpiSession>(argc, argv);
    group.comm = std::make_unique<parallel::MpiCommunicator>();
  } else {
    group.comm = std::make_unique<parallel::SingleProcessCommunicator>();
  }
  g_in_group = group.comm->world_size() > 1;
  g_rank = group.comm->rank();
  return group;
}

// Everything the flags say, validated before the model loads.
struct WorkerConfig {
  std::string model_path;
  std::string host;
  int32_t port = 0;
  ApiKey api_key;  // required on TargetWorker and Draft calls when set
  TlsCredentials tls;  // the gRPC port's identity (--tls-cert / --tls-key); default plaintext
  int32_t metrics_port = -1;
  // Threads, precision, KV sizing and the device (engine/options); the
  // model options have no TP fields yet.
  engine::EngineOptions engine;
  std::string speculative;           // "" = no draft beside the target
  int64_t draft_kv_cache_bytes = 0;
};

// --host and --port; INVALID_ARGUMENT naming the flag.
absl::Status ValidateServingFlags(const WorkerConfig& config) {
  if (config.host.empty()) return absl::InvalidArgumentError("--host is empty");
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--port %d is out of range: must be in [0, 65535]", config.port));
  }
  return absl::OkStatus();
}

// Reads and validates every flag; INVALID_ARGUMENT naming the first bad one.
absl::StatusOr<WorkerConfig> ReadConfig() {
  WorkerConfig config;
  config.model_path = absl::GetFlag(FLAGS_model);
  if (config.model_path.empty()) return absl::InvalidArgumentError("--model is required");
  config.host = absl::GetFlag(FLAGS_host);
  config.port = absl::GetFlag(FLAGS_port);
  config.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  RETURN_IF_ERROR(ValidateServingFlags(config));
  ASSIGN_OR_RETURN(config.tls, TlsCredentials::FromFiles(absl::GetFlag(FLAGS_tls_cert),
                                                         absl::GetFlag(FLAGS_tls_key)));
  ASSIGN_OR_RETURN(config.api_key, ApiKey::FromFlags(absl::GetFlag(FLAGS_api_key),
                                                     absl::GetFlag(FLAGS_api_key_file)));
  ASSIGN_OR_RETURN(config.engine, engine::EngineOptionsFromFlags(
                                      {.max_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens)}));
  config.speculative = absl::GetFlag(FLAGS_speculative);
  config.draft_kv_cache_bytes = absl::GetFlag(FLAGS_draft_kv_cache_bytes);
  return config;
}

// This rank's shard of the target model, the runner on --device and the
// step executor's settings (its KV blocks sized from --kv-blocks, else
// --kv-cache-bytes on the CPU or --gpu-memory-fraction on a GPU).
struct Target {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<model::ModelRunner> runner;  // runs `model`
  worker::StepExecutorConfig exec_config;
};

// Loads this rank's shard of the model (all of it in a group of one).
absl::StatusOr<Target> LoadTarget(const WorkerConfig& config, parallel::Communicator* comm) {
  model::ModelOptions model_options = config.engine.model;
  if (comm->world_size() > 1) {
    model_options.tp_rank = comm->rank();
    model_options.tp_world_size = comm->world_size();
    model_options.communicator = comm;
  }
  Target target;
  ASSIGN_OR_RETURN(target.model, model::Model::Load(config.model_path, model_options));
  ASSIGN_OR_RETURN(tokenizer::Vocab vocab, tokenizer::LoadVocabFromGguf(target.model->file()));
  ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                   tokenizer::Tokenizer::Create(vocab));
  target.exec_config.block_size = config.engine.block_size;
  target.exec_config.eos_token_ids = tokenizer->EndOfGenerationIds();
  ASSIGN_OR_RETURN(device::LoadedRunner loaded,
                   device::MakeModelRunner(target.model.get(), config.engine.Runner()));
  target.runner = std::move(loaded.runner);
  target.exec_config.num_blocks = loaded.num_blocks;
  return target;
}

// The draft beside the target (--speculative), loaded before serving so that
// a bad spec fails at start-up.
absl::StatusOr<std::unique_ptr<draft::DraftService>> MakeDraftService(
    const WorkerConfig& config, const worker::StepExecutorConfig& exec_config) {
  draft::ProposerOptions options;
  ASSIGN_OR_RETURN(options.spec, draft::ParseSpeculativeSpec(config.speculative));
  options.target_model_path = config.model_path;
  options.model_options.num_threads = config.engine.model.num_threads;
  options.model_options.precision = config.engine.model.precision;
  options.block_size = config.engine.block_size;
  options.kv_cache_bytes = config.draft_kv_cache_bytes;
  options.eos_token_ids = exec_config.eos_token_ids;
  ASSIGN_OR_RETURN(std::unique_ptr<draft::Proposer> proposer, draft::MakeProposer(options));
  std::fprintf(stderr, "%s: also drafting (tandem.v1.Draft): %s\n", kProcess,
               proposer->info().name.c_str());
  return std::make_unique<draft::DraftService>(std::move(proposer));
}

// Waits for SIGTERM/SIGINT and drains `server`. In a group, the main thread
// meanwhile runs `mpi_thread`'s loop (every collective is made there) while
// a second thread waits and drains; then the other ranks are told to stop.
absl::Status ServeUntilDrained(grpc::Server& server, const std::function<void()>& stop_admitting,
                               tp::MpiThreadQueue* mpi_thread, parallel::Communicator* comm) {
  if (mpi_thread == nullptr) {
    ServeUntilShutdownSignal(kProcess, server, kDrainGrace, stop_admitting);
    return absl::OkStatus();
  }
  std::thread signal_thread([&] {
    ServeUntilShutdownSignal(kProcess, server, kDrainGrace, stop_admitting);
    mpi_thread->Stop();  // handlers are done: Loop runs what is queued and returns
  });
  mpi_thread->Loop();
  signal_thread.join();
  return tp::BroadcastEnvelope(comm, tp::EnvelopeKind::kShutdown);
}

// Rank 0: serves TargetWorker (and Draft with --speculative) until SIGTERM or
// SIGINT, drains, and stops the other ranks. The process exit code.
int ServeRankZero(const WorkerConfig& config, const Target& target, parallel::Communicator* comm) {
  std::unique_ptr<tp::MpiThreadQueue> mpi_thread;
  if (comm->world_size() > 1) mpi_thread = std::make_unique<tp::MpiThreadQueue>();
  absl::StatusOr<std::unique_ptr<worker::TargetWorkerService>> service =
      worker::TargetWorkerService::Create(target.runner.get(), target.exec_config, comm,
                                          mpi_thread.get());
  if (!service.ok()) return Fail(service.status());
  std::unique_ptr<draft::DraftService> draft_service;
  std::vector<grpc::Service*> services = {service->get()};
  std::vector<std::string> service_names = {kServiceName};
  if (!config.speculative.empty()) {
    absl::StatusOr<std::unique_ptr<draft::DraftService>> made =
        MakeDraftService(config, target.exec_config);
    if (!made.ok()) return Fail(made.status());
    draft_service = *std::move(made);
    services.push_back(draft_service.get());
    service_names.push_back(kDraftServiceName);
  }
  ProcessMetrics metrics("tandem:worker", ModelNameLabel(config.model_path));
  (*service)->set_metrics(&metrics);
  (*service)->set_api_key(config.api_key);
  if (draft_service != nullptr) draft_service->set_api_key(config.api_key);
  absl::StatusOr<std::unique_ptr<HttpServer>> metrics_server =
      ServeProcessMetrics(&metrics, kProcess, config.host, config.metrics_port);
  if (!metrics_server.ok()) return Fail(metrics_server.status());
  absl::StatusOr<GrpcServer> started =
      StartGrpcServer(config.host, config.port, services, service_names, config.tls);
  if (!started.ok()) return Fail(started.status());
  std::fprintf(stderr, "%s: model %s on %s, %d KV blocks of %d tokens, precision %s, "
               "tensor-parallel size %d\n", kProcess, target.model->config().name.c_str(),
               target.runner->device_name(), target.exec_config.num_blocks, config.engine.block_size,
               config.engine.precision.c_str(), comm->world_size());
  AnnounceListening(kProcess, started->address);
  const auto stop_admitting = [&] {
    (*service)->SetServing(false);
    if (draft_service != nullptr) draft_service->SetServing(false);
  };
  absl::Status drained =
      ServeUntilDrained(*started->server, stop_admitting, mpi_thread.get(), comm);
  if (!drained.ok()) return Fail(drained);
  std::fprintf(stderr, "%s: stopped\n", kProcess);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BlockShutdownSignals();
  RaiseOpenFileLimit();
  Group group = JoinGroup(&argc, &argv);
  const Program program{
      kProcess,
      {{"", "--model PATH [flags]",
        "One rank of a target worker group: serves tandem.v1.TargetWorker (alone, or every "
        "rank under mpirun -np N)",
        FlagsDefinedIn({__FILE__, engine::EngineFlagsFile()})}}};
  ParseCommandLineOrExit(program, argc, argv);
  absl::StatusOr<WorkerConfig> config = ReadConfig();
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<Target> target = LoadTarget(*config, group.comm.get());
  if (!target.ok()) return Fail(target.status());
  if (group.comm->rank() != 0) {
    absl::Status followed =
        tp::RunFollower(target->runner.get(), target->exec_config, group.comm.get());
    if (!followed.ok()) return Fail(followed);
    return 0;
  }
  return ServeRankZero(*config, *target, group.comm.get());
}
