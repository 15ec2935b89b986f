#include "coordinator/cluster/scheduler_loop.h"

#include "common/logging.h"

namespace tandem::coordinator {

SchedulerLoop::SchedulerLoop(Scheduler* scheduler, GrpcWorkerGroup* remote,
                             const SchedulerLoopOptions& options)
    : scheduler_(scheduler), remote_(remote), options_(options) {
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

SchedulerLoop::Snapshot SchedulerLoop::snapshot() const {
  absl::MutexLock lock(&snapshot_mutex_);
  return snapshot_;
}

void SchedulerLoop::Publish() {
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

void SchedulerLoop::Run() {
  while (true) {
    const bool broken = remote_ != nullptr && remote_->broken();
    {
      absl::MutexLock lock(&mutex_);
      // Clearing wake_ before looking at the scheduler means a Submit that
      // lands after HasWork() saw nothing still wakes the next wait.
      auto woken = absl::Condition(
          +[](SchedulerLoop* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
            return self->wake_ || self->stop_;
          },
          this);
      if (broken) {
        // Sleep between reconnect attempts, but fail new work at once.
        mutex_.AwaitWithTimeout(woken, options_.reconnect_interval);
      } else {
        mutex_.Await(woken);
      }
      if (stop_) return;
      wake_ = false;
    }
    while (scheduler_->HasWork()) {
      absl::StatusOr<bool> stepped = scheduler_->Step();
      Publish();
      if (!stepped.ok()) {
        // The scheduler already failed the step's requests; keep serving.
        TANDEM_LOG(kError, "scheduler step failed: %s", stepped.status().ToString());
        if (remote_ != nullptr && remote_->broken() && healthy_.exchange(false)) {
          TANDEM_LOG(kError, "worker group at %s is down; reconnecting every %s",
                     remote_->address(), absl::FormatDuration(options_.reconnect_interval));
        }
      }
      absl::MutexLock lock(&mutex_);
      if (stop_) return;
    }
    // Every request that ran on the broken group has failed by now.
    if (remote_ != nullptr && remote_->broken()) TryReconnect();
  }
}

}  // namespace tandem::coordinator
