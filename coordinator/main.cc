// tandem-coordinator: the public Inference gRPC server of a tandem cluster.
//   tandem-coordinator --model M.gguf --worker TARGET[,TARGET...]
//                      [--draft TARGET[,TARGET...]]
//                                      (tandem-worker groups, one replica each;
//                                       tandem-draft workers)
//   tandem-coordinator --model M.gguf --local              (model in-process)
// A TARGET is HOST:PORT or dns:///NAME:PORT (every address NAME resolves to,
// re-resolved every --resolve-interval-ms: replicas and drafts come and go
// without a restart; see coordinator/target_resolver.h).
//
// Thread model: the main thread parses flags, builds everything, starts the
// server, prints "tandem-coordinator listening on HOST:PORT" and then waits in
// sigwait() for SIGTERM/SIGINT (blocked in every thread). The Inference
// service runs on gRPC's callback API: gRPC's few callback threads parse,
// validate, route (Router) and submit requests, and a reactor per call streams
// its results, with no thread per call (tests/integration/
// stream_threads_test.py: at most 32 threads with 1,000 streams open); one
// thread (RequestRegistry) hands the schedulers' results to the reactors and
// starts their writes; one scheduler thread per worker group (SchedulerLoop) owns
// that group's Scheduler, runs every step and, when the group's worker is
// lost, reconnects it about once a second (in --local mode the model's thread
// pool runs each forward under the one loop). Two discovery threads (worker
// groups, draft workers) re-resolve the targets and add, drain and drop
// groups and drafts (WorkerGroupPool, DraftWorkerSet).
// Shutdown: health NOT_SERVING, refuse new requests (UNAVAILABLE), server
// Shutdown with a 10 s grace deadline for in-flight streams (calls still open
// then are cancelled, and their requests with them), stop discovery,
// join the scheduler threads, exit 0.
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
#include "absl/strings/str_join.h"
#include "common/command_line.h"
#include "common/grpc_server.h"
#include "coordinator/discovery.h"
#include "coordinator/draft_pool_set.h"
#include "coordinator/draft_worker_set.h"
#include "coordinator/grpc_draft_pool.h"
#include "coordinator/local_draft_pool.h"
#include "coordinator/grpc_worker_group.h"
#include "coordinator/inference_service.h"
#include "coordinator/local_worker_group.h"
#include "coordinator/router.h"
#include "coordinator/scheduler.h"
#include "coordinator/scheduler_loop.h"
#include "coordinator/target_resolver.h"
#include "coordinator/worker_group_pool.h"
#include "draft/proposer_factory.h"
#include "draft/speculative_spec.h"
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
absl::StatusOr<coordinator::WorkerGroupPool::Connected> MakeLocalGroup(
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
  return coordinator::WorkerGroupPool::Connected{std::move(*group), nullptr};
}

// Connects a tandem-worker group (the pool's connector).
absl::StatusOr<coordinator::WorkerGroupPool::Connected> ConnectRemote(const std::string& address,
                                                                      absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<coordinator::GrpcWorkerGroup>> g =
      coordinator::GrpcWorkerGroup::Connect(address, timeout);
  if (!g.ok()) return g.status();
  coordinator::GrpcWorkerGroup* remote = g->get();
  return coordinator::WorkerGroupPool::Connected{*std::move(g), remote};
}

// Start-up: resolves `discovery`'s targets and connects until one group
// answers (the model's geometry comes from it), within `timeout`. The
// others are connected by the pool's first Reconcile.
absl::StatusOr<std::pair<std::string, coordinator::WorkerGroupPool::Connected>> ConnectFirst(
    coordinator::Discovery& discovery, absl::Duration timeout, const std::string& spec) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::NotFoundError("no address resolved");
  while (true) {
    for (const std::string& address : discovery.Resolve()) {
      absl::Duration left = std::max(deadline - absl::Now(), absl::Milliseconds(100));
      absl::StatusOr<coordinator::WorkerGroupPool::Connected> c =
          ConnectRemote(address, std::min(left, absl::Seconds(5)));
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
  const std::string worker_spec = absl::GetFlag(FLAGS_worker);
  const std::string draft_spec = absl::GetFlag(FLAGS_draft);
  const bool local = absl::GetFlag(FLAGS_local);
  if (model_path.empty()) {
    return Fail(absl::InvalidArgumentError("--model PATH is required (the tokenizer comes from it)"));
  }
  if (local == !worker_spec.empty()) {
    return Fail(absl::InvalidArgumentError("give exactly one of --worker TARGET or --local"));
  }
  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--port %d is out of range: must be in [0, 65535]", port)));
  }
  const int32_t resolve_interval_ms = absl::GetFlag(FLAGS_resolve_interval_ms);
  if (resolve_interval_ms < 100 || resolve_interval_ms > 3600000) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--resolve-interval-ms %d is out of range: must be in [100, 3600000]",
        resolve_interval_ms)));
  }
  const absl::Duration resolve_interval = absl::Milliseconds(resolve_interval_ms);
  absl::StatusOr<std::vector<coordinator::Target>> worker_targets =
      coordinator::ParseTargetList(worker_spec);
  if (!worker_targets.ok()) return Fail(worker_targets.status());
  if (!local && worker_targets->empty()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--worker '%s' names no target", worker_spec)));
  }
  absl::StatusOr<std::vector<coordinator::Target>> draft_targets =
      coordinator::ParseTargetList(draft_spec);
  if (!draft_targets.ok()) return Fail(draft_targets.status());

  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(model_path);
  if (!file.ok()) return Fail(file.status());
  absl::StatusOr<tokenizer::Vocab> vocab = tokenizer::LoadVocabFromGguf(**file);
  if (!vocab.ok()) return Fail(vocab.status());
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok =
      tokenizer::Tokenizer::Create(*std::move(vocab));
  if (!tok.ok()) return Fail(tok.status());

  coordinator::SchedulerConfig sched_config;
  sched_config.max_num_batched_tokens = absl::GetFlag(FLAGS_max_batched_tokens);
  sched_config.max_num_seqs = absl::GetFlag(FLAGS_max_seqs);
  sched_config.enable_prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
  if (absl::Status s = coordinator::ValidateSchedulerConfig(sched_config); !s.ok()) return Fail(s);

  // The first group fixes the served model's geometry; every later one must
  // match it (WorkerGroupPool::Add).
  std::unique_ptr<model::Model> model;
  std::string first_name = "local";
  absl::StatusOr<coordinator::WorkerGroupPool::Connected> first;
  std::unique_ptr<coordinator::WorkerGroupPool> pool;
  std::unique_ptr<coordinator::Discovery> worker_discovery;
  if (local) {
    first = MakeLocalGroup(model_path, **tok, &model);
  } else {
    worker_discovery = std::make_unique<coordinator::Discovery>(
        "worker group", *worker_targets, resolve_interval,
        [&pool, resolve_interval](const std::vector<std::string>& addresses) {
          pool->Reconcile(addresses, std::min(resolve_interval, absl::Seconds(2)));
        });
    absl::StatusOr<std::pair<std::string, coordinator::WorkerGroupPool::Connected>> connected =
        ConnectFirst(*worker_discovery, absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s)),
                     worker_spec);
    if (connected.ok()) {
      first_name = connected->first;
      first = std::move(connected->second);
    } else {
      first = connected.status();
    }
  }
  if (!first.ok()) return Fail(first.status());
  const coordinator::WorkerGroupInfo info = first->group->info();

  coordinator::RouterConfig router_config;
  router_config.block_size = info.block_size;
  router_config.affinity_max_extra_load = absl::GetFlag(FLAGS_affinity_max_extra_load);
  if (absl::Status s = coordinator::ValidateRouterConfig(router_config); !s.ok()) return Fail(s);

  // Speculative decoding: draft workers (--draft) or a draft in this
  // process (--speculative); one draft pool per group's scheduler thread.
  coordinator::DraftWorkerSet drafts((*tok)->vocab_size());
  coordinator::SpeculationConfig speculation;
  {
    absl::StatusOr<int32_t> n =
        coordinator::ParseNumSpeculativeTokens(absl::GetFlag(FLAGS_num_speculative_tokens));
    if (!n.ok()) return Fail(n.status());
    speculation.num_speculative_tokens = *n;
  }
  const std::string speculative = absl::GetFlag(FLAGS_speculative);
  if (!speculative.empty() && !draft_targets->empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--speculative %s and --draft %s both choose the draft: give one", speculative,
        draft_spec)));
  }
  const int32_t draft_timeout_ms = absl::GetFlag(FLAGS_draft_timeout_ms);
  if (draft_timeout_ms < 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--draft-timeout-ms %d is out of range: must be >= 1", draft_timeout_ms)));
  }
  // The deployment's draft (none, draft workers or an in-process proposer),
  // inside a DraftPoolSet that adds in-process n-gram drafting for requests
  // naming "ngram".
  std::function<std::unique_ptr<coordinator::DraftPool>()> deployment_pool;
  std::string local_draft_kind;
  if (!draft_targets->empty()) {
    deployment_pool = [&drafts, draft_timeout_ms] {
      return std::unique_ptr<coordinator::DraftPool>(std::make_unique<coordinator::GrpcDraftPool>(
          &drafts, absl::Milliseconds(draft_timeout_ms)));
    };
  } else if (!speculative.empty()) {
    absl::StatusOr<draft::SpeculativeSpec> spec = draft::ParseSpeculativeSpec(speculative);
    if (!spec.ok()) return Fail(spec.status());
    draft::ProposerOptions po;
    po.spec = *spec;
    po.target_model_path = model_path;
    po.block_size = info.block_size;
    po.eos_token_ids = (*tok)->EndOfGenerationIds();
    // Fail at start-up, not on the first request.
    absl::StatusOr<std::unique_ptr<draft::Proposer>> probe = draft::MakeProposer(po);
    if (!probe.ok()) return Fail(probe.status());
    local_draft_kind = draft::DraftKindOfName((*probe)->info().name);
    deployment_pool = [po] {
      absl::StatusOr<std::unique_ptr<draft::Proposer>> p = draft::MakeProposer(po);
      CHECK(p.ok(), "draft %s failed to load a second time: %s",
            draft::FormatSpeculativeSpec(po.spec), p.status().ToString());
      return std::unique_ptr<coordinator::DraftPool>(
          std::make_unique<coordinator::LocalDraftPool>(*std::move(p)));
    };
  }
  auto make_ngram = coordinator::NgramDraftPoolMaker(info.block_size, info.vocab_size,
                                                     (*tok)->EndOfGenerationIds());
  coordinator::WorkerGroupPool::DraftPoolFactory draft_pools = [deployment_pool, make_ngram] {
    return std::unique_ptr<coordinator::DraftPool>(std::make_unique<coordinator::DraftPoolSet>(
        deployment_pool ? deployment_pool() : nullptr, make_ngram));
  };

  coordinator::InferenceService service(tok->get(), info);
  pool = std::make_unique<coordinator::WorkerGroupPool>(sched_config, router_config, tok->get(),
                                                        &service, ConnectRemote, draft_pools,
                                                        speculation);
  if (absl::Status s = pool->Add(first_name, *std::move(first)); !s.ok()) return Fail(s);
  service.set_pool(pool.get(), &drafts);
  service.set_local_draft_kind(local_draft_kind);
  std::unique_ptr<coordinator::Discovery> draft_discovery;
  if (!draft_targets->empty()) {
    draft_discovery = std::make_unique<coordinator::Discovery>(
        "draft worker", *draft_targets, resolve_interval,
        [&drafts, resolve_interval](const std::vector<std::string>& addresses) {
          drafts.Reconcile(addresses, std::min(resolve_interval, absl::Seconds(2)));
        });
    draft_discovery->Start();
  }
  if (worker_discovery != nullptr) worker_discovery->Start();
  auto shutdown_loops = [&] {
    if (worker_discovery != nullptr) worker_discovery->Shutdown();
    if (draft_discovery != nullptr) draft_discovery->Shutdown();
    pool.reset();
  };

  absl::StatusOr<GrpcServer> started =
      StartGrpcServer(absl::GetFlag(FLAGS_host), port, {&service}, {"tandem.v1.Inference"});
  if (!started.ok()) {
    shutdown_loops();
    return Fail(started.status());
  }
  std::unique_ptr<grpc::Server> server = std::move(started->server);
  std::printf("tandem-coordinator listening on %s\n", started->address.c_str());
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
