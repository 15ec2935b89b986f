#include "coordinator/scheduler_loop.h"

#include "common/logging.h"

namespace tandem::coordinator {

SchedulerLoop::SchedulerLoop(Scheduler* scheduler)
    : scheduler_(scheduler), thread_([this] { Run(); }) {}

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

void SchedulerLoop::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mutex_);
      // Clearing wake_ before looking at the scheduler means a Submit that
      // lands after HasWork() saw nothing still wakes the next wait.
      mutex_.Await(absl::Condition(
          +[](SchedulerLoop* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
            return self->wake_ || self->stop_;
          },
          this));
      if (stop_) return;
      wake_ = false;
    }
    while (scheduler_->HasWork()) {
      absl::StatusOr<bool> stepped = scheduler_->Step();
      if (!stepped.ok()) {
        // The scheduler already failed the step's requests; keep serving.
        TANDEM_LOG(kError, "scheduler step failed: %s", stepped.status().ToString());
      }
      absl::MutexLock lock(&mutex_);
      if (stop_) return;
    }
  }
}

}  // namespace tandem::coordinator
