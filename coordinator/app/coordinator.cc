#include "coordinator/app/coordinator.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/cluster/draft_pool_set.h"
#include "coordinator/cluster/grpc_draft_pool.h"
#include "coordinator/cluster/grpc_worker_group.h"
#include "coordinator/cluster/local_draft_pool.h"
#include "coordinator/cluster/local_worker_group.h"
#include "coordinator/cluster/router.h"
#include "coordinator/cluster/scheduler_loop.h"
#include "draft/proposer_factory.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/kv_budget.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::coordinator::app {
namespace {

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

}  // namespace

// Builds everything `c` holds, ready to serve: the tokenizer, the first
// worker group, the pool, the service, and discovery running.
absl::Status BuildCoordinator(const CoordinatorConfig& config, Coordinator& c) {
  ASSIGN_OR_RETURN(c.tok, LoadTokenizer(config.model_path));
  ASSIGN_OR_RETURN(NamedGroup first, FirstGroup(config, c));
  RETURN_IF_ERROR(BuildPool(config, std::move(first), c));
  StartDiscovery(config, c);
  return absl::OkStatus();
}

}  // namespace tandem::coordinator::app
