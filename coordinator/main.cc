// tandem-coordinator: the public Inference gRPC server of a tandem cluster.
//   tandem-coordinator --model M.gguf --worker HOST:PORT[,HOST:PORT...]
//                                      (tandem-worker groups, one replica each)
//   tandem-coordinator --model M.gguf --local              (model in-process)
//
// Thread model: the main thread parses flags, builds everything, starts the
// server, prints "tandem-coordinator listening on HOST:PORT" and then waits in
// sigwait() for SIGTERM/SIGINT (blocked in every thread). gRPC's handler
// threads parse, validate, route (Router) and submit requests and stream
// their results; one scheduler thread per worker group (SchedulerLoop) owns
// that group's Scheduler, runs every step and, when the group's worker is
// lost, reconnects it about once a second (in --local mode the model's thread
// pool runs each forward under the one loop).
// Shutdown: health NOT_SERVING, refuse new requests (UNAVAILABLE), server
// Shutdown with a 10 s grace deadline for in-flight streams, join the
// scheduler threads, exit 0.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "coordinator/grpc_worker_group.h"
#include "coordinator/inference_service.h"
#include "coordinator/local_worker_group.h"
#include "coordinator/router.h"
#include "coordinator/scheduler.h"
#include "coordinator/scheduler_loop.h"
#include "engine/model/kv_budget.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on");
ABSL_FLAG(int32_t, port, 0, "Port to listen on (0: the OS picks one)");
ABSL_FLAG(std::string, model, "", "GGUF model: its tokenizer always; the model itself with --local");
ABSL_FLAG(std::string, worker, "",
          "Target worker group addresses HOST:PORT, comma-separated (one tandem-worker group "
          "each; requests are routed by load and prefix affinity)");
ABSL_FLAG(bool, local, false, "Run the model in-process instead of connecting to --worker");
ABSL_FLAG(int32_t, connect_timeout_s, 30, "--worker: seconds to wait for the worker to answer");
ABSL_FLAG(int32_t, threads, 0, "--local: threads for one forward (0 = every core)");
ABSL_FLAG(int64_t, kv_cache_bytes, 512ll << 20, "--local: KV cache capacity in bytes");
ABSL_FLAG(int32_t, kv_blocks, 0, "--local: KV cache capacity in blocks (overrides bytes)");
ABSL_FLAG(int32_t, block_size, 16, "--local: tokens per KV block");
ABSL_FLAG(int32_t, max_batched_tokens, 1024, "Token budget of one scheduler step");
ABSL_FLAG(int32_t, max_seqs, 256, "Sequences in one scheduler step");
ABSL_FLAG(bool, prefix_cache, true, "Reuse cached KV blocks of shared prompt prefixes");
ABSL_FLAG(int64_t, affinity_max_extra_load, 8,
          "Route to the group caching a request's prefix only while its load (requests) is at "
          "most this much above the least loaded group's");

namespace {

using namespace tandem;  // NOLINT: a main file

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "tandem-coordinator: %s\n", s.ToString().c_str());
  return 1;
}

// The in-process group of --local mode (the model is kept alive beside it).
absl::StatusOr<std::unique_ptr<coordinator::WorkerGroup>> MakeLocalGroup(
    const std::string& model_path, const tokenizer::Tokenizer& tok,
    std::unique_ptr<model::Model>* model_out) {
  model::ModelOptions model_options;
  model_options.num_threads = absl::GetFlag(FLAGS_threads);
  absl::StatusOr<std::unique_ptr<model::Model>> model = model::Model::Load(model_path, model_options);
  if (!model.ok()) return model.status();
  const int32_t block_size = absl::GetFlag(FLAGS_block_size);
  if (block_size < 1 || block_size > 1024) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--block-size %d is out of range: must be in [1, 1024]", block_size));
  }
  worker::StepExecutorConfig config;
  config.block_size = block_size;
  config.eos_token_ids = tok.EndOfGenerationIds();
  absl::StatusOr<int32_t> num_blocks = model::NumKvBlocks(
      **model, block_size, absl::GetFlag(FLAGS_kv_blocks), absl::GetFlag(FLAGS_kv_cache_bytes));
  if (!num_blocks.ok()) return num_blocks.status();
  config.num_blocks = *num_blocks;
  absl::StatusOr<std::unique_ptr<coordinator::LocalWorkerGroup>> group =
      coordinator::LocalWorkerGroup::Create(model->get(), config);
  if (!group.ok()) return group.status();
  *model_out = *std::move(model);
  return std::unique_ptr<coordinator::WorkerGroup>(std::move(*group));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "tandem-coordinator --model M.gguf (--worker HOST:PORT | --local) [--host H] [--port P]");
  // Accepts the documented --dashed-flag spelling (--kv-cache-bytes).
  tandem::NormalizedArgs normalized_args(argc, argv);
  absl::ParseCommandLine(normalized_args.argc(), normalized_args.argv());

  // Block the shutdown signals before any thread starts so that every thread
  // inherits the mask and only sigwait() below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string worker_address = absl::GetFlag(FLAGS_worker);
  const std::vector<std::string> worker_addresses =
      absl::StrSplit(worker_address, ',', absl::SkipWhitespace());
  const bool local = absl::GetFlag(FLAGS_local);
  if (model_path.empty()) {
    return Fail(absl::InvalidArgumentError("--model PATH is required (the tokenizer comes from it)"));
  }
  if (local == !worker_address.empty()) {
    return Fail(absl::InvalidArgumentError("give exactly one of --worker HOST:PORT or --local"));
  }
  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--port %d is out of range: must be in [0, 65535]", port)));
  }

  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(model_path);
  if (!file.ok()) return Fail(file.status());
  absl::StatusOr<tokenizer::Vocab> vocab = tokenizer::LoadVocabFromGguf(**file);
  if (!vocab.ok()) return Fail(vocab.status());
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok =
      tokenizer::Tokenizer::Create(*std::move(vocab));
  if (!tok.ok()) return Fail(tok.status());

  std::unique_ptr<model::Model> model;
  std::vector<std::unique_ptr<coordinator::WorkerGroup>> groups;
  std::vector<coordinator::GrpcWorkerGroup*> remotes;  // [groups]; null in --local mode
  std::vector<std::string> names;                       // [groups]
  if (local) {
    absl::StatusOr<std::unique_ptr<coordinator::WorkerGroup>> g =
        MakeLocalGroup(model_path, **tok, &model);
    if (!g.ok()) return Fail(g.status());
    groups.push_back(*std::move(g));
    remotes.push_back(nullptr);
    names.push_back("local");
  } else {
    if (worker_addresses.empty()) {
      return Fail(absl::InvalidArgumentError(
          absl::StrFormat("--worker '%s' names no HOST:PORT", worker_address)));
    }
    for (const std::string& address : worker_addresses) {
      absl::StatusOr<std::unique_ptr<coordinator::GrpcWorkerGroup>> g =
          coordinator::GrpcWorkerGroup::Connect(
              address, absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s)));
      if (!g.ok()) return Fail(g.status());
      remotes.push_back(g->get());
      names.push_back(address);
      groups.push_back(*std::move(g));
    }
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const coordinator::WorkerGroupInfo& info = groups[i]->info();
    if (info.vocab_size != (*tok)->vocab_size()) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "the worker group %s's vocabulary has %d tokens but --model's tokenizer has %d",
          names[i], info.vocab_size, (*tok)->vocab_size())));
    }
    const coordinator::WorkerGroupInfo& first = groups[0]->info();
    if (info.model_name != first.model_name || info.context_length != first.context_length ||
        info.block_size != first.block_size) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "worker group %s serves '%s' (context %d, block size %d) but %s serves '%s' "
          "(context %d, block size %d); every group must be a replica of one model",
          names[i], info.model_name, info.context_length, info.block_size, names[0],
          first.model_name, first.context_length, first.block_size)));
    }
  }

  coordinator::SchedulerConfig sched_config;
  sched_config.max_num_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens);
  sched_config.max_num_seqs = absl::GetFlag(FLAGS_max_seqs);
  sched_config.enable_prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
  if (absl::Status s = coordinator::ValidateSchedulerConfig(sched_config); !s.ok()) return Fail(s);
  coordinator::RouterConfig router_config;
  router_config.block_size = groups[0]->info().block_size;
  router_config.affinity_max_extra_load = absl::GetFlag(FLAGS_affinity_max_extra_load);
  if (absl::Status s = coordinator::ValidateRouterConfig(router_config); !s.ok()) return Fail(s);

  coordinator::InferenceService service(tok->get(), groups[0]->info());
  std::vector<std::unique_ptr<coordinator::Scheduler>> schedulers;
  std::vector<std::unique_ptr<coordinator::SchedulerLoop>> loops;
  std::vector<coordinator::SchedulerLoop*> loop_ptrs;
  for (size_t i = 0; i < groups.size(); ++i) {
    schedulers.push_back(std::make_unique<coordinator::Scheduler>(sched_config, groups[i].get(),
                                                                  tok->get(), &service));
    loops.push_back(std::make_unique<coordinator::SchedulerLoop>(schedulers[i].get(), remotes[i]));
    loop_ptrs.push_back(loops[i].get());
  }
  service.set_groups(loop_ptrs, names, router_config);
  auto shutdown_loops = [&] {
    for (auto& loop : loops) loop->Shutdown();
  };

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string host = absl::GetFlag(FLAGS_host);
  builder.AddListeningPort(absl::StrFormat("%s:%d", host, port), grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    shutdown_loops();
    return Fail(absl::UnavailableError(
        absl::StrFormat("cannot listen on %s:%d", host, port)));
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  std::printf("tandem-coordinator listening on %s:%d\n", host.c_str(), bound_port);
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "tandem-coordinator: %s received, draining\n", strsignal(signal_number));
  server->GetHealthCheckService()->SetServingStatus(false);
  service.StopAdmitting();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  server->Wait();
  shutdown_loops();
  std::fprintf(stderr, "tandem-coordinator: stopped\n");
  return 0;
}
