#include "coordinator/request_registry.h"

namespace tandem::coordinator {

void RequestRegistry::Add(RequestId id, RequestObserver* observer) {
  absl::MutexLock lock(&mutex_);
  observers_[id] = observer;
}

void RequestRegistry::Remove(RequestId id) {
  absl::MutexLock lock(&mutex_);
  observers_.erase(id);
}

void RequestRegistry::OnDelta(const CompletionDelta& delta) {
  absl::MutexLock lock(&mutex_);
  auto it = observers_.find(delta.id);
  if (it != observers_.end()) it->second->OnDelta(delta);
}

void RequestRegistry::OnFinished(const RequestOutput& output) {
  absl::MutexLock lock(&mutex_);
  auto it = observers_.find(output.id);
  if (it != observers_.end()) it->second->OnFinished(output);
}

}  // namespace tandem::coordinator
