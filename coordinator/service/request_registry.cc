#include "coordinator/service/request_registry.h"

#include <utility>

namespace tandem::coordinator {

RequestRegistry::RequestRegistry() : thread_([this] { Run(); }) {}

RequestRegistry::~RequestRegistry() {
  {
    absl::MutexLock lock(&queue_mutex_);
    stop_ = true;
  }
  thread_.join();
}

void RequestRegistry::Add(RequestId id, RequestObserver* observer) {
  absl::MutexLock lock(&observers_mutex_);
  observers_[id] = observer;
}

void RequestRegistry::Remove(RequestId id) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    // Inside Deliver, which holds the mutex: an observer destroyed while its
    // own callback runs (its last reference dropped there).
    observers_mutex_.AssertHeld();
    observers_.erase(id);
    return;
  }
  absl::MutexLock lock(&observers_mutex_);
  observers_.erase(id);
}

void RequestRegistry::OnDelta(const CompletionDelta& delta) { Push(delta); }

void RequestRegistry::OnFinished(const RequestOutput& output) { Push(output); }

void RequestRegistry::Push(Event event) {
  absl::MutexLock lock(&queue_mutex_);
  queue_.push_back(std::move(event));
}

void RequestRegistry::Run() {
  std::vector<Event> batch;
  while (true) {
    batch.clear();
    {
      absl::MutexLock lock(&queue_mutex_);
      queue_mutex_.Await(absl::Condition(
          +[](RequestRegistry* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->queue_mutex_) {
            return !self->queue_.empty() || self->stop_;
          },
          this));
      if (queue_.empty()) return;  // stopped
      batch.swap(queue_);
    }
    for (const Event& event : batch) Deliver(event);
  }
}

void RequestRegistry::Deliver(const Event& event) {
  const RequestId id = std::visit([](const auto& e) { return e.id; }, event);
  absl::MutexLock lock(&observers_mutex_);
  auto it = observers_.find(id);
  if (it == observers_.end()) return;
  if (const auto* delta = std::get_if<CompletionDelta>(&event)) {
    it->second->OnDelta(*delta);
  } else {
    it->second->OnFinished(std::get<RequestOutput>(event));
  }
}

}  // namespace tandem::coordinator
