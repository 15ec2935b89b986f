// RequestRegistry: the requests in flight on the Inference service, each with
// the observer that delivers its results to the client (the call's reactor).
// It is the one RequestObserver the schedulers report to and routes each
// callback to the request's own observer by id.
//
// Thread-safety: every method may be called from any thread. An observer's
// callbacks run with the registry's mutex held, so once Remove(id) returns no
// callback is running or will run on that observer and it may be destroyed.
// Observers must therefore not call Add or Remove from their callbacks.
#ifndef TANDEM_COORDINATOR_REQUEST_REGISTRY_H_
#define TANDEM_COORDINATOR_REQUEST_REGISTRY_H_

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/request.h"

namespace tandem::coordinator {

class RequestRegistry final : public RequestObserver {
 public:
  // `observer` (not owned) receives `id`'s callbacks until Remove(id). A
  // request is added before it is submitted, so no result is missed.
  void Add(RequestId id, RequestObserver* observer);
  // No-op when `id` is not registered.
  void Remove(RequestId id);

  // RequestObserver (scheduler threads): forwarded to the request's observer;
  // dropped when it was removed already.
  void OnDelta(const CompletionDelta& delta) override;
  void OnFinished(const RequestOutput& output) override;

 private:
  absl::Mutex mutex_;
  absl::flat_hash_map<RequestId, RequestObserver*> observers_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_REQUEST_REGISTRY_H_
