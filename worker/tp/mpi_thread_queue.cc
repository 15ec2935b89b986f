#include "worker/tp/mpi_thread_queue.h"

#include <utility>

namespace tandem::tp {

bool MpiThreadQueue::Run(absl::AnyInvocable<void()> task) {
  Item item{std::move(task)};
  absl::MutexLock lock(&mutex_);
  if (stopped_) return false;
  queue_.push_back(&item);
  mutex_.Await(absl::Condition(&item.done));
  return true;
}

void MpiThreadQueue::Loop() {
  while (true) {
    Item* item = nullptr;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(this, &MpiThreadQueue::HasWorkOrStopped));
      if (queue_.empty()) return;  // stopped and drained
      item = queue_.front();
      queue_.pop_front();
    }
    item->task();
    absl::MutexLock lock(&mutex_);
    item->done = true;
  }
}

void MpiThreadQueue::Stop() {
  absl::MutexLock lock(&mutex_);
  stopped_ = true;
}

}  // namespace tandem::tp
