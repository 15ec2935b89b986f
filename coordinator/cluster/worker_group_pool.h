// WorkerGroupPool: the coordinator's target worker groups (replicas) while
// discovery adds and removes them under running traffic, and the Router that
// spreads requests over them.
//
// Each group is an Entry: the WorkerGroup, its Scheduler and its
// SchedulerLoop (the group's scheduler thread). Request handlers Route() to
// an entry and keep the returned shared_ptr until their request is over, so
// an entry outlives every request that ran on it. Reconcile() brings the
// pool in line with the addresses discovery resolved: new addresses are
// connected (and must serve the same model, context and block size as the
// first group: replicas of one model), missing ones are drained — no new
// requests, in-flight ones finish — and dropped once idle. An address that
// returns is taken back (undrained, or connected afresh).
//
// Requests are submitted through the pool (Submit), which tracks the group
// each runs on so Cancel reaches it wherever it is. With migration on
// (set_migration) the pool is every loop's RequestMigrator: a request
// evicted from a failed group is Resumed on the group the router picks.
//
// Thread-safety: every method may be called from any thread (one mutex;
// connecting runs outside it).
#ifndef TANDEM_COORDINATOR_CLUSTER_WORKER_GROUP_POOL_H_
#define TANDEM_COORDINATOR_CLUSTER_WORKER_GROUP_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/cluster/grpc_worker_group.h"
#include "coordinator/cluster/request_migrator.h"
#include "coordinator/cluster/router.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/cluster/scheduler_loop.h"
#include "coordinator/scheduler/worker_group.h"

namespace tandem::coordinator {

// One worker group in the pool. Members are destroyed loop first (joins the
// scheduler thread), then the scheduler, its draft pool, then the group.
struct WorkerGroupEntry {
  int64_t id = 0;
  std::string name;                    // its address, or "local"
  std::unique_ptr<WorkerGroup> group;
  GrpcWorkerGroup* remote = nullptr;   // `group` when remote, else null
  std::unique_ptr<DraftPool> drafts;   // speculative decoding, or null
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<SchedulerLoop> loop;
  std::atomic<bool> draining{false};   // discovery no longer lists it
};

// A snapshot of one group for ModelInfo and logs.
struct WorkerGroupStatusSnapshot {
  std::string name;
  bool healthy = true;  // connected and its step in flight not overdue
  bool draining = false;
  int64_t load = 0;
  SchedulerLoop::Snapshot stats;
};

class WorkerGroupPool final : public RequestMigrator {
 public:
  // A connected group for Reconcile: `remote` is `group` when it is a
  // GrpcWorkerGroup (the loop reconnects it after a failure), else null.
  struct Connected {
    std::unique_ptr<WorkerGroup> group;
    GrpcWorkerGroup* remote = nullptr;
  };
  using Connector =
      std::function<absl::StatusOr<Connected>(const std::string& address, absl::Duration timeout)>;
  // Makes each new group's draft pool (one per scheduler thread); may be
  // empty: no speculation.
  using DraftPoolFactory = std::function<std::unique_ptr<DraftPool>()>;

  // `tokenizer` and `observer` (the service the schedulers report to) must
  // outlive the pool; the configs must pass their Validate* (CHECKed).
  WorkerGroupPool(const SchedulerConfig& scheduler_config, const RouterConfig& router_config,
                  const tokenizer::Tokenizer* tokenizer, RequestObserver* observer,
                  Connector connector, DraftPoolFactory draft_pools = {},
                  const SpeculationConfig& speculation = {});
  // Shuts every group's loop down.
  ~WorkerGroupPool() override;

  // Request migration for the groups added from now on (call before the
  // first Add): up to `max_migrations` moves per request (0: off; a failed
  // group fails its requests), each waiting at most `timeout` for a healthy
  // group. INVALID_ARGUMENT naming the value when either is negative.
  absl::Status set_migration(int32_t max_migrations, absl::Duration timeout);

  // Adds a connected group named `name`. INVALID_ARGUMENT naming both groups
  // when its model, vocabulary, context or block size differ from the first
  // group's; ALREADY_EXISTS when a group of that name is in the pool.
  absl::Status Add(const std::string& name, Connected connected);

  // Brings the pool in line with `addresses` (discovery's current set):
  // drains groups whose address is gone, takes back drained ones that
  // returned, connects each new address (waiting up to `connect_timeout` per
  // address; failures are logged and retried on the next call) and drops
  // drained groups that are idle.
  void Reconcile(const std::vector<std::string>& addresses, absl::Duration connect_timeout);

  // Chooses the group for a request with `prompt` (Router: load and prefix
  // affinity over the healthy groups not draining). UNAVAILABLE naming the
  // groups when none can take it.
  absl::StatusOr<std::shared_ptr<WorkerGroupEntry>> Route(std::span<const int32_t> prompt);

  // Submits `request` to `group` (from Route) and tracks it there until
  // Forget. Errors as Scheduler::Submit (nothing stays tracked).
  absl::Status Submit(const std::shared_ptr<WorkerGroupEntry>& group, GenerateRequest request);
  // Cancels request `id` on the group it runs on now; a migration in
  // progress ends it as cancelled instead of placing it. No-op when unknown.
  void Cancel(RequestId id);
  // Stops tracking request `id` (its call is over). No-op when unknown.
  void Forget(RequestId id);
  // RequestMigrator (scheduler threads).
  Placement Place(MigratingRequest& request) override;

  // The first group's geometry (every group matches it); nullopt while the
  // pool has never held a group.
  std::optional<WorkerGroupInfo> info() const;
  // Every group in the pool, in the order they were added.
  std::vector<WorkerGroupStatusSnapshot> Statuses() const;
  int32_t num_groups() const;

 private:
  // Drops drained groups whose load is zero.
  void Reap();

  const SchedulerConfig scheduler_config_;
  const tokenizer::Tokenizer* tokenizer_;
  RequestObserver* observer_;
  const Connector connector_;
  const DraftPoolFactory draft_pools_;
  const SpeculationConfig speculation_;
  Router router_;

  mutable absl::Mutex mutex_;
  std::vector<std::shared_ptr<WorkerGroupEntry>> entries_ ABSL_GUARDED_BY(mutex_);
  std::optional<WorkerGroupInfo> info_ ABSL_GUARDED_BY(mutex_);
  std::string first_name_ ABSL_GUARDED_BY(mutex_);
  int64_t next_id_ ABSL_GUARDED_BY(mutex_) = 1;
  // Addresses whose last connect failed, so a dead address logs once.
  absl::flat_hash_set<std::string> failing_ ABSL_GUARDED_BY(mutex_);
  SchedulerLoopOptions loop_options_ ABSL_GUARDED_BY(mutex_);

  // Where each submitted request runs. Locked before mutex_.
  struct TrackedRequest {
    std::shared_ptr<WorkerGroupEntry> group;
    bool cancelled = false;
  };
  absl::Mutex tracked_mutex_ ABSL_ACQUIRED_BEFORE(mutex_);
  absl::flat_hash_map<RequestId, TrackedRequest> tracked_ ABSL_GUARDED_BY(tracked_mutex_);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_WORKER_GROUP_POOL_H_
