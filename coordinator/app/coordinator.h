// The coordinator's parts, built from its config: the tokenizer, the worker
// groups (in-process with --local, else tandem-worker groups found by
// discovery) in their pool with its scheduler threads, the draft workers,
// request admission, the Inference service and the OpenAI-compatible API.
#ifndef TANDEM_COORDINATOR_APP_COORDINATOR_H_
#define TANDEM_COORDINATOR_APP_COORDINATOR_H_

#include <memory>

#include "absl/status/status.h"
#include "coordinator/app/config.h"
#include "coordinator/cluster/discovery.h"
#include "coordinator/cluster/draft_worker_set.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "coordinator/http/openai_api.h"
#include "coordinator/http/serving_metrics.h"
#include "coordinator/service/inference_service.h"
#include "coordinator/service/request_admission.h"
#include "engine/model/model.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace tandem::coordinator::app {

// Everything the coordinator runs. Members are declared in the order they
// are built, so that destruction (reverse) takes each down before what it
// uses: discovery before the pool it updates, the pool (its scheduler
// threads) before the service they report to and the --local model.
struct Coordinator {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<model::Model> model;  // --local only
  std::unique_ptr<coordinator::DraftWorkerSet> drafts;
  std::unique_ptr<coordinator::RequestAdmission> admission;
  std::unique_ptr<coordinator::InferenceService> service;
  std::unique_ptr<coordinator::http::OpenAiApi> http_api;
  std::unique_ptr<coordinator::http::ServingMetrics> metrics;  // outlives the pool's reports
  std::unique_ptr<WorkerGroupPool> pool;
  std::unique_ptr<coordinator::Discovery> worker_discovery;  // --worker only
  std::unique_ptr<coordinator::Discovery> draft_discovery;   // --draft only

  // Stops discovery and joins every scheduler thread; call once no request
  // is in flight (the server drained). Idempotent.
  void Stop() {
    if (worker_discovery != nullptr) worker_discovery->Shutdown();
    if (draft_discovery != nullptr) draft_discovery->Shutdown();
    pool.reset();
  }
  ~Coordinator() { Stop(); }
};

// Builds everything `c` holds, ready to serve: the tokenizer, the first
// worker group, the pool, the service, and discovery running.
absl::Status BuildCoordinator(const CoordinatorConfig& config, Coordinator& c);

}  // namespace tandem::coordinator::app

#endif  // TANDEM_COORDINATOR_APP_COORDINATOR_H_
