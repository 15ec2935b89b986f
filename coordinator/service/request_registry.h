// RequestRegistry: the requests in flight on the Inference service, each with
// the observer that delivers its results to the client (the call's reactor).
// It is the one RequestObserver the schedulers report to. Their callbacks are
// queued and delivered, in order, on the registry's own thread to the
// request's observer, so a scheduler thread never pays for gRPC's write path
// (starting a write costs tens of microseconds; a step may produce hundreds).
//
// Thread-safety: every method may be called from any thread. OnDelta /
// OnFinished only queue. Observers are called on the delivery thread with
// the registry's observer mutex held, so once Remove(id) returns no callback
// is running or will run on that observer and it may be destroyed. Observers
// must not call Add from their callbacks; Remove from a callback (an observer
// whose callback drops the last reference to it, and whose destructor
// removes its requests) erases at once, the callback's observer included.
#ifndef TANDEM_COORDINATOR_SERVICE_REQUEST_REGISTRY_H_
#define TANDEM_COORDINATOR_SERVICE_REQUEST_REGISTRY_H_

#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/api/request.h"

namespace tandem::coordinator {

class RequestRegistry final : public RequestObserver {
 public:
  // Starts the delivery thread.
  RequestRegistry();
  // Delivers what is queued (to observers still registered) and joins the
  // thread. The schedulers must no longer report.
  ~RequestRegistry() override;
  RequestRegistry(const RequestRegistry&) = delete;
  RequestRegistry& operator=(const RequestRegistry&) = delete;

  // `observer` (not owned) receives `id`'s callbacks until Remove(id). A
  // request is added before it is submitted, so no result is missed.
  void Add(RequestId id, RequestObserver* observer);
  // No-op when `id` is not registered. Results still queued for `id` are
  // dropped.
  void Remove(RequestId id);

  // RequestObserver (scheduler threads): queued for delivery; never blocks
  // beyond the queue's mutex.
  void OnDelta(const CompletionDelta& delta) override;
  void OnFinished(const RequestOutput& output) override;

 private:
  using Event = std::variant<CompletionDelta, RequestOutput>;

  void Push(Event event);
  // The delivery thread: takes the queue, delivers each event, until
  // stopped with nothing queued.
  void Run();
  void Deliver(const Event& event);

  absl::Mutex queue_mutex_;
  std::vector<Event> queue_ ABSL_GUARDED_BY(queue_mutex_);
  bool stop_ ABSL_GUARDED_BY(queue_mutex_) = false;

  absl::Mutex observers_mutex_;
  absl::flat_hash_map<RequestId, RequestObserver*> observers_ ABSL_GUARDED_BY(observers_mutex_);

  std::thread thread_;  // last: starts after every other member exists
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_REQUEST_REGISTRY_H_
