// ServingMetrics: the coordinator's Prometheus metrics, under vLLM's names
// (vllm:*) so dashboards, the Gateway API inference extension's endpoint
// picker and `vllm bench` read them unchanged, plus tandem:* for what vLLM has
// no name for. Every metric carries model_name; per-group ones worker_group.
//
// Two sources: each finished request (OnFinished, from RequestAdmission on a
// scheduler thread) feeds the request counters and latency histograms; each
// scrape (Render) reads the worker groups' snapshots for the gauges
// (running / waiting requests, KV usage, group health and load) and the
// groups' cumulative counters (preemptions), added as increments since the
// last scrape so a group that leaves does not make a counter go down.
//
// Thread-safety: OnFinished and Render may run concurrently from any threads
// (prometheus-cpp's metrics are thread-safe; scrape state is under a mutex).
#ifndef TANDEM_COORDINATOR_HTTP_SERVING_METRICS_H_
#define TANDEM_COORDINATOR_HTTP_SERVING_METRICS_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/api/request.h"
#include "coordinator/cluster/draft_worker_set.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem::coordinator::http {

class ServingMetrics final : public RequestObserver {
 public:
  // `pool` and `drafts` (may be null) must outlive this object; `block_size`
  // is the served model's KV block size.
  ServingMetrics(std::string model_name, int32_t block_size, const WorkerGroupPool* pool,
                 const DraftWorkerSet* drafts);

  // RequestObserver: OnFinished counts a finished request; deltas are not
  // counted here.
  void OnDelta(const CompletionDelta&) override {}
  void OnFinished(const RequestOutput& output) override;

  // The Prometheus text exposition of every metric, gauges read now.
  std::string Render();

 private:
  // A worker group's cumulative scheduler counters at the last scrape.
  struct GroupCounters {
    int64_t preemptions = 0;
    int64_t block_copies = 0;
    int64_t beam_forks = 0;
    int64_t migrations = 0;
    int64_t migration_failures = 0;
  };

  prometheus::Labels With(prometheus::Labels extra) const;
  // The constructor's halves: vLLM's names, then tandem's.
  void RegisterVllmMetrics(prometheus::Registry& r);
  void RegisterTandemMetrics(prometheus::Registry& r);
  // Adds a group's counter increments since the last scrape.
  void CountGroupDeltas(const GroupCounters& now, const GroupCounters& before);
  void UpdateGauges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(scrape_mutex_);

  const std::string model_name_;
  const int32_t block_size_;
  const WorkerGroupPool* const pool_;
  const DraftWorkerSet* const drafts_;
  std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Gauge>* running_;
  prometheus::Family<prometheus::Gauge>* waiting_;
  prometheus::Family<prometheus::Gauge>* kv_usage_;
  prometheus::Family<prometheus::Gauge>* cache_config_;
  prometheus::Family<prometheus::Counter>* prompt_tokens_;
  prometheus::Family<prometheus::Counter>* generation_tokens_;
  prometheus::Family<prometheus::Counter>* request_success_;
  prometheus::Family<prometheus::Counter>* preemptions_;
  prometheus::Family<prometheus::Counter>* prefix_queries_;
  prometheus::Family<prometheus::Counter>* prefix_hits_;
  prometheus::Family<prometheus::Counter>* spec_drafts_;
  prometheus::Family<prometheus::Counter>* spec_draft_tokens_;
  prometheus::Family<prometheus::Counter>* spec_accepted_tokens_;
  prometheus::Family<prometheus::Counter>* spec_accepted_per_position_;
  prometheus::Family<prometheus::Counter>* beam_forks_;
  prometheus::Family<prometheus::Counter>* migrations_;
  prometheus::Family<prometheus::Counter>* migration_failures_;
  prometheus::Family<prometheus::Counter>* block_copies_;
  prometheus::Family<prometheus::Histogram>* ttft_;
  prometheus::Family<prometheus::Histogram>* tpot_;
  prometheus::Family<prometheus::Histogram>* e2e_;
  prometheus::Family<prometheus::Histogram>* queue_time_;
  prometheus::Family<prometheus::Gauge>* group_healthy_;
  prometheus::Family<prometheus::Gauge>* group_load_;
  prometheus::Family<prometheus::Gauge>* group_overhead_;
  prometheus::Family<prometheus::Gauge>* group_blocks_used_;
  prometheus::Family<prometheus::Gauge>* drafts_healthy_;

  absl::Mutex scrape_mutex_;
  // Per group: the cumulative preemptions already added to the counter.
  absl::flat_hash_map<std::string, GroupCounters> groups_seen_ ABSL_GUARDED_BY(scrape_mutex_);
};

}  // namespace tandem::coordinator::http

#endif  // TANDEM_COORDINATOR_HTTP_SERVING_METRICS_H_
