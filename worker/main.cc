// tandem-worker: one rank of a target worker group. Alone it is a group of
// one; under mpirun (`mpirun -np N tandem-worker ...`) every process is one
// tensor-parallel rank holding its shard of the model and of the KV cache:
//   tandem-worker --model PATH [--host 127.0.0.1] [--port 0] [--kv-cache-bytes N | --kv-blocks N]
//                 [--block-size 16] [--threads 0] [--precision fast|reference]
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
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "common/flag_help.h"
#include "common/grpc_server.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "draft/draft_service.h"
#include "draft/proposer_factory.h"
#include "draft/api/speculative_spec.h"
#include "engine/model/kv_budget.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "engine/parallel/communicator.h"
#include "engine/parallel/mpi_communicator.h"
#include "worker/tp/mpi_thread_queue.h"
#include "worker/tp/step_broadcaster.h"
#include "worker/worker_service.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on");
ABSL_FLAG(int32_t, port, 0, "Port to listen on (0: the OS picks one; the real port is printed)");
ABSL_FLAG(int64_t, kv_cache_bytes, 512ll << 20, "KV cache capacity in bytes");
ABSL_FLAG(int32_t, kv_blocks, 0, "KV cache capacity in blocks (overrides --kv-cache-bytes)");
ABSL_FLAG(int32_t, block_size, 16, "Tokens per KV block");
ABSL_FLAG(int32_t, threads, 0, "Threads for one forward (0 = every core)");
ABSL_FLAG(std::string, precision, "fast", "fast (quantized kernels, f16 KV) or reference (f32)");
ABSL_FLAG(std::string, speculative, "",
          "Also serve tandem.v1.Draft on this port with a draft of this kind: ngram, "
          "layer-skip:L (this model's first L layers) or model[:PATH] (default: this model); "
          "the coordinator's --draft names this worker to use it");
ABSL_FLAG(int64_t, draft_kv_cache_bytes, 256ll << 20,
          "--speculative with a model: the draft's KV cache capacity in bytes");

namespace {

// The service name health reports for, besides the overall "" entry.
constexpr char kServiceName[] = "tandem.v1.TargetWorker";
constexpr char kDraftServiceName[] = "tandem.v1.Draft";

// Set once this process is one rank of several: a failing rank then aborts
// the group, since the others would wait in a collective forever.
bool g_in_group = false;
int g_rank = 0;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "tandem-worker%s: %s\n",
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

}  // namespace

int main(int argc, char** argv) {
  // Block the shutdown signals before any thread exists (gRPC's, the model's
  // pool) so every thread inherits the mask and only sigwait() sees them.
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGTERM);
  sigaddset(&shutdown_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);

  std::unique_ptr<tandem::parallel::MpiSession> mpi_session;
  std::unique_ptr<tandem::parallel::Communicator> comm;
  if (LaunchedByMpi()) {
    mpi_session = std::make_unique<tandem::parallel::MpiSession>(&argc, &argv);
    comm = std::make_unique<tandem::parallel::MpiCommunicator>();
  } else {
    comm = std::make_unique<tandem::parallel::SingleProcessCommunicator>();
  }
  const int rank = comm->rank();
  const int world_size = comm->world_size();
  g_in_group = world_size > 1;
  g_rank = rank;

  const tandem::Program program{
      "tandem-worker",
      {{"", "--model PATH [flags]",
        "One rank of a target worker group: serves tandem.v1.TargetWorker (alone, or every "
        "rank under mpirun -np N)",
        tandem::FlagsDefinedIn(__FILE__)}}};
  tandem::ParseCommandLineOrExit(program, argc, argv);

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
  if (block_size < 1 || block_size > 1024) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--block-size %d is out of range: must be in [1, 1024]", block_size)));
  }
  const int32_t threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--threads %d is negative: must be >= 0 (0 = every core)", threads)));
  }
  tandem::model::ModelOptions model_options;
  model_options.num_threads = threads;
  if (world_size > 1) {
    model_options.tp_rank = rank;
    model_options.tp_world_size = world_size;
    model_options.communicator = comm.get();
  }
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

  tandem::worker::StepExecutorConfig exec_config;
  exec_config.block_size = block_size;
  exec_config.eos_token_ids = (*tokenizer)->EndOfGenerationIds();
  absl::StatusOr<int32_t> num_blocks = tandem::model::NumKvBlocks(
      **model, block_size, absl::GetFlag(FLAGS_kv_blocks), absl::GetFlag(FLAGS_kv_cache_bytes));
  if (!num_blocks.ok()) return Fail(num_blocks.status());
  exec_config.num_blocks = *num_blocks;
  if (rank != 0) {
    absl::Status followed = tandem::tp::RunFollower(model->get(), exec_config, comm.get());
    if (!followed.ok()) return Fail(followed);
    return 0;
  }
  // Rank 0 of a group: collectives run on this (the main) thread.
  std::unique_ptr<tandem::tp::MpiThreadQueue> mpi_thread;
  if (world_size > 1) mpi_thread = std::make_unique<tandem::tp::MpiThreadQueue>();
  absl::StatusOr<std::unique_ptr<tandem::worker::TargetWorkerService>> service =
      tandem::worker::TargetWorkerService::Create(model->get(), exec_config, comm.get(),
                                                  mpi_thread.get());
  if (!service.ok()) return Fail(service.status());

  // The draft beside the target (--speculative), loaded before serving so
  // that a bad spec fails at start-up.
  std::unique_ptr<tandem::draft::DraftService> draft_service;
  std::vector<grpc::Service*> services = {service->get()};
  std::vector<std::string> service_names = {kServiceName};
  if (!absl::GetFlag(FLAGS_speculative).empty()) {
    absl::StatusOr<tandem::draft::SpeculativeSpec> spec =
        tandem::draft::ParseSpeculativeSpec(absl::GetFlag(FLAGS_speculative));
    if (!spec.ok()) return Fail(spec.status());
    tandem::draft::ProposerOptions options;
    options.spec = *spec;
    options.target_model_path = model_path;
    options.model_options.num_threads = threads;
    options.model_options.precision = model_options.precision;
    options.block_size = block_size;
    options.kv_cache_bytes = absl::GetFlag(FLAGS_draft_kv_cache_bytes);
    options.eos_token_ids = exec_config.eos_token_ids;
    absl::StatusOr<std::unique_ptr<tandem::draft::Proposer>> proposer =
        tandem::draft::MakeProposer(options);
    if (!proposer.ok()) return Fail(proposer.status());
    std::fprintf(stderr, "tandem-worker: also drafting (tandem.v1.Draft): %s\n",
                 (*proposer)->info().name.c_str());
    draft_service = std::make_unique<tandem::draft::DraftService>(*std::move(proposer));
    services.push_back(draft_service.get());
    service_names.push_back(kDraftServiceName);
  }

  absl::StatusOr<tandem::GrpcServer> started =
      tandem::StartGrpcServer(host, port, services, service_names);
  if (!started.ok()) return Fail(started.status());
  std::unique_ptr<grpc::Server> server = std::move(started->server);
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  std::fprintf(stderr,
               "tandem-worker: model %s, %d KV blocks of %d tokens, precision %s, "
               "tensor-parallel size %d\n",
               (*model)->config().name.c_str(), exec_config.num_blocks, block_size,
               precision.c_str(), world_size);
  std::printf("tandem-worker listening on %s\n", started->address.c_str());
  std::fflush(stdout);

  auto wait_and_drain = [&] {
    int signal_number = 0;
    sigwait(&shutdown_signals, &signal_number);
    std::fprintf(stderr, "tandem-worker: signal %d, draining\n", signal_number);
    health->SetServingStatus(false);  // every service → NOT_SERVING
    (*service)->SetServing(false);
    if (draft_service != nullptr) draft_service->SetServing(false);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server->Wait();
  };
  if (mpi_thread == nullptr) {
    wait_and_drain();
  } else {
    std::thread signal_thread([&] {
      wait_and_drain();
      mpi_thread->Stop();  // handlers are done: Loop runs what is queued and returns
    });
    mpi_thread->Loop();
    signal_thread.join();
    absl::Status sent =
        tandem::tp::BroadcastEnvelope(comm.get(), tandem::tp::EnvelopeKind::kShutdown);
    if (!sent.ok()) return Fail(sent);
  }
  std::fprintf(stderr, "tandem-worker: stopped\n");
  return 0;
}
