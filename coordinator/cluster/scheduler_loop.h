// SchedulerLoop: the scheduler thread. Owns one thread that runs
// Scheduler::Step() while there is work and sleeps on a condition when idle;
// Submit and Cancel wake it. The Scheduler (and everything it owns, through
// the RequestObserver callbacks) is touched only by that thread.
//
// Reconnection: given the GrpcWorkerGroup the scheduler drives, the loop
// turns unhealthy when a step breaks the group. It keeps stepping until the
// scheduler holds no request (each failed step fails its requests with
// UNAVAILABLE at once, or evicts them for migration), then calls Reconnect
// about once per `reconnect_interval` (each try bounded by
// `reconnect_timeout`; the thread sleeps in between). Once it succeeds the
// scheduler's KV bookkeeping is reset and the loop is healthy again.
//
// Migration: with a RequestMigrator and max_migrations > 0, the scheduler
// evicts a failed step's requests instead of failing them (each is charged a
// strike, MigratingRequest::num_strikes), then, while the group is broken,
// every other request it holds (uncharged), and the loop hands each to the
// migrator (another healthy group, or this one once it has reconnected). A
// request no group takes within `migration_timeout`, or one with more than
// max_migrations strikes, fails with UNAVAILABLE naming the cause; one whose
// client cancelled meanwhile ends as cancelled. Until then the loop holds it
// (and counts it in load()), retrying every 20 ms.
//
// Thread-safety: Submit, Cancel, Shutdown, load and healthy may be called from
// any thread.
#ifndef TANDEM_COORDINATOR_CLUSTER_SCHEDULER_LOOP_H_
#define TANDEM_COORDINATOR_CLUSTER_SCHEDULER_LOOP_H_

#include <atomic>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/cluster/grpc_worker_group.h"
#include "coordinator/cluster/request_migrator.h"
#include "coordinator/scheduler/scheduler.h"

namespace tandem::coordinator {

struct SchedulerLoopOptions {
  // Pause between reconnect attempts of a broken group.
  absl::Duration reconnect_interval = absl::Seconds(1);
  // How long one attempt waits for the worker's channel.
  absl::Duration reconnect_timeout = absl::Milliseconds(500);
  // Request migration (off without a migrator or with max_migrations 0):
  // max_migrations bounds a request's strikes, not its moves. `migrator` is
  // not owned and must outlive the loop.
  RequestMigrator* migrator = nullptr;
  int32_t max_migrations = 0;
  absl::Duration migration_timeout = absl::Seconds(1);
};

class SchedulerLoop {
 public:
  // Starts the thread. `scheduler` must outlive the loop (or its Shutdown).
  // `remote`, when not null, is the group `scheduler` steps; the loop
  // reconnects it after it breaks. It must outlive the loop too.
  explicit SchedulerLoop(Scheduler* scheduler, GrpcWorkerGroup* remote = nullptr,
                         const SchedulerLoopOptions& options = {});
  // Calls Shutdown().
  ~SchedulerLoop();
  SchedulerLoop(const SchedulerLoop&) = delete;
  SchedulerLoop& operator=(const SchedulerLoop&) = delete;

  // Scheduler::Submit, then wakes the thread. Errors as Scheduler::Submit.
  absl::Status Submit(GenerateRequest request);
  // Scheduler::Cancel, then wakes the thread (the request's blocks are freed
  // in the next step).
  void Cancel(RequestId id);
  // Scheduler::Resume, then wakes the thread.
  void Resume(MigratingRequest request);
  // Stops after the step in progress and joins the thread; requests still
  // queued or running are abandoned (callers drain first). Idempotent.
  void Shutdown();

  // The scheduler's load (Scheduler::load) and the evicted requests the
  // loop holds until a group takes them.
  int64_t load() const { return scheduler_->load() + num_held_.load(); }
  // False from a step that broke the group until Reconnect succeeds.
  bool healthy() const { return healthy_.load(); }
  // True while the group's step in flight is overdue (GrpcWorkerGroup::
  // suspect: the worker may be hung): reported unhealthy and routed nothing
  // new while another group is clear, until it answers or its step's
  // deadline breaks it.
  bool suspect() const { return remote_ != nullptr && remote_->suspect(); }
  // Successful reconnects so far.
  int64_t num_reconnects() const { return num_reconnects_.load(); }
  // The scheduler's counters and KV occupancy as of the last step (a copy
  // the scheduler thread publishes after every step); the migration counters
  // are live.
  struct Snapshot {
    SchedulerStats scheduler;
    kv::KvStats kv;
    int64_t num_requests_running = 0;
    int64_t num_requests_waiting = 0;
    // Evicted requests this loop moved to a group, and those that failed
    // instead (no group in time, or too many moves).
    int64_t num_migrations = 0;
    int64_t num_migration_failures = 0;
  };
  Snapshot snapshot() const;

 private:
  // An evicted request waiting for a group, and when it fails.
  struct Held {
    MigratingRequest request;
    absl::Time deadline;
  };

  void Run();
  // Sleeps until woken, or until the next reconnect attempt or held-request
  // retry is due. False once stopped.
  bool WaitForWork();
  void Wake();
  // Takes the scheduler's evicted requests and tries to place every held
  // one (scheduler thread).
  void MigrateEvicted();
  // Places, or ends, one held request: false while it should wait on.
  bool PlaceOrFinish(Held& held);
  // One bounded Reconnect attempt of the broken group (scheduler thread).
  void TryReconnect();
  // Copies the scheduler's counters into snapshot_ (scheduler thread).
  void Publish();

  Scheduler* scheduler_;
  GrpcWorkerGroup* remote_;
  const SchedulerLoopOptions options_;
  const bool migrating_ = options_.migrator != nullptr && options_.max_migrations > 0;
  std::atomic<bool> healthy_{true};
  std::atomic<int64_t> num_reconnects_{0};
  std::atomic<int64_t> num_held_{0};
  std::atomic<int64_t> num_migrations_{0};
  std::atomic<int64_t> num_migration_failures_{0};
  // Scheduler-thread state.
  std::vector<Held> held_;
  absl::Time next_reconnect_ = absl::InfinitePast();
  absl::Mutex mutex_;
  bool wake_ ABSL_GUARDED_BY(mutex_) = false;
  bool stop_ ABSL_GUARDED_BY(mutex_) = false;
  mutable absl::Mutex snapshot_mutex_;
  Snapshot snapshot_ ABSL_GUARDED_BY(snapshot_mutex_);
  std::thread thread_;  // last: starts after every other member exists
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_SCHEDULER_LOOP_H_
