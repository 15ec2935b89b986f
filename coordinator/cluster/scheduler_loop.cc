#include "coordinator/cluster/scheduler_loop.h"

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace tandem::coordinator {

SchedulerLoop::SchedulerLoop(Scheduler* scheduler, GrpcWorkerGroup* remote,
                             const SchedulerLoopOptions& options)
    : scheduler_(scheduler), remote_(remote), options_(options) {
  scheduler_->set_evict_on_failure(migrating_);
  Publish();
  thread_ = std::thread([this] { Run(); });
}

SchedulerLoop::~SchedulerLoop() { Shutdown(); }

absl::Status SchedulerLoop::Submit(GenerateRequest request) {
  absl::Status status = scheduler_->Submit(std::move(request));
  if (status.ok()) Wake();
  return status;
}

void SchedulerLoop::Cancel(RequestId id) {
  scheduler_->Cancel(id);
  Wake();
}

void SchedulerLoop::Resume(MigratingRequest request) {
  scheduler_->Resume(std::move(request));
  Wake();
}

SchedulerLoop::Snapshot SchedulerLoop::snapshot() const {
  Snapshot snapshot;
  {
    absl::MutexLock lock(&snapshot_mutex_);
    snapshot = snapshot_;
  }
  // Live, not as of the last step: a failure is counted before its request
  // is reported finished.
  snapshot.num_migrations = num_migrations_.load();
  snapshot.num_migration_failures = num_migration_failures_.load();
  return snapshot;
}

void SchedulerLoop::Publish() {
  // The migration counters are read live by snapshot().
  Snapshot snapshot{scheduler_->stats(), scheduler_->kv_stats(),
                    scheduler_->NumRequestsRunning(), scheduler_->NumRequestsWaiting()};
  absl::MutexLock lock(&snapshot_mutex_);
  snapshot_ = snapshot;
}

void SchedulerLoop::Wake() {
  absl::MutexLock lock(&mutex_);
  wake_ = true;
}

void SchedulerLoop::Shutdown() {
  {
    absl::MutexLock lock(&mutex_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void SchedulerLoop::TryReconnect() {
  next_reconnect_ = absl::Now() + options_.reconnect_interval;
  absl::Status status = remote_->Reconnect(options_.reconnect_timeout);
  if (!status.ok()) {
    TANDEM_LOG(kVerbose, "reconnect failed: %s", status.ToString());
    return;
  }
  // The worker was Reset: no sequence and no cached KV block survive there.
  scheduler_->ResetKvCache();
  Publish();
  num_reconnects_.fetch_add(1);
  healthy_.store(true);
  TANDEM_LOG(kInfo, "worker group at %s reconnected; taking requests again",
             remote_->address());
}

bool SchedulerLoop::PlaceOrFinish(Held& held) {
  MigratingRequest& m = held.request;
  const int64_t id = m.id().value();
  if (m.num_strikes() > options_.max_migrations) {
    num_migration_failures_.fetch_add(1);
    absl::Status error = absl::UnavailableError(absl::StrFormat(
        "request %d: %d worker groups failed while it ran there with no token generated in "
        "between, more than --max-migrations %d allows: %s",
        id, m.num_strikes(), options_.max_migrations, m.cause().message()));
    scheduler_->Finish(std::move(m), FinishReason::kError, error);
    return true;
  }
  switch (options_.migrator->Place(m)) {
    case RequestMigrator::Placement::kPlaced:
      num_migrations_.fetch_add(1);
      TANDEM_LOG(kInfo, "request %d migrated to another worker group", id);
      return true;
    case RequestMigrator::Placement::kCancelled:
      scheduler_->Finish(std::move(m), FinishReason::kCancelled,
                         absl::CancelledError("cancelled while migrating"));
      return true;
    case RequestMigrator::Placement::kNoGroup:
      break;
  }
  if (absl::Now() < held.deadline) return false;
  num_migration_failures_.fetch_add(1);
  absl::Status error = absl::UnavailableError(absl::StrFormat(
      "request %d: no healthy worker group took it within %s (--migration-timeout-ms) after "
      "its group failed: %s",
      id, absl::FormatDuration(options_.migration_timeout), m.cause().message()));
  scheduler_->Finish(std::move(m), FinishReason::kError, error);
  return true;
}

void SchedulerLoop::MigrateEvicted() {
  for (MigratingRequest& m : scheduler_->TakeEvicted()) {
    held_.push_back({std::move(m), absl::Now() + options_.migration_timeout});
  }
  if (held_.empty()) return;
  std::vector<Held> waiting;
  for (Held& held : held_) {
    if (!PlaceOrFinish(held)) waiting.push_back(std::move(held));
  }
  held_ = std::move(waiting);
  num_held_.store(static_cast<int64_t>(held_.size()));
}

bool SchedulerLoop::WaitForWork() {
  // Held requests are retried often: a group may turn healthy any moment.
  constexpr absl::Duration kHeldRetry = absl::Milliseconds(20);
  const bool broken = remote_ != nullptr && remote_->broken();
  absl::MutexLock lock(&mutex_);
  // Clearing wake_ before looking at the scheduler means a Submit that
  // lands after HasWork() saw nothing still wakes the next wait.
  auto woken = absl::Condition(
      +[](SchedulerLoop* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
        return self->wake_ || self->stop_;
      },
      this);
  if (!held_.empty()) {
    mutex_.AwaitWithTimeout(woken, kHeldRetry);
  } else if (broken) {
    // Sleep until the next reconnect attempt, but take new work at once.
    mutex_.AwaitWithDeadline(woken, next_reconnect_);
  } else {
    mutex_.Await(woken);
  }
  if (stop_) return false;
  wake_ = false;
  return true;
}

void SchedulerLoop::Run() {
  while (WaitForWork()) {
    while (scheduler_->HasWork()) {
      if (migrating_ && remote_ != nullptr && remote_->broken()) {
        // Nothing can run here: everything else moves on, uncharged.
        scheduler_->EvictAll(absl::UnavailableError(
            absl::StrFormat("worker group at %s is down", remote_->address())));
        MigrateEvicted();
        Publish();
        break;
      }
      absl::StatusOr<bool> stepped = scheduler_->Step();
      if (!stepped.ok()) {
        // The scheduler already failed or evicted the step's requests.
        TANDEM_LOG(kError, "scheduler step failed: %s", stepped.status().ToString());
        if (remote_ != nullptr && remote_->broken() && healthy_.exchange(false)) {
          TANDEM_LOG(kError, "worker group at %s is down; reconnecting every %s",
                     remote_->address(), absl::FormatDuration(options_.reconnect_interval));
        }
      }
      MigrateEvicted();
      Publish();
      absl::MutexLock lock(&mutex_);
      if (stop_) return;
    }
    // Every request that ran on the broken group has failed or left by now.
    if (remote_ != nullptr && remote_->broken() && absl::Now() >= next_reconnect_) {
      TryReconnect();
    }
    MigrateEvicted();
    Publish();
  }
}

}  // namespace tandem::coordinator
