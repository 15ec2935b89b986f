// RequestStream: the hand-off of one request's results from the scheduler
// thread (producer, through the RequestObserver) to the gRPC handler thread
// that streams them (consumer).
//
// Bounded without ever blocking the producer: deltas of the same completion
// index are coalesced (text and token ids appended) while the consumer has not
// taken them, so the queue holds at most one pending delta per index (n <= 128)
// plus the final output, however slow the client reads.
//
// Thread-safety: every method is safe to call from any thread.
#ifndef TANDEM_COORDINATOR_SERVICE_REQUEST_STREAM_H_
#define TANDEM_COORDINATOR_SERVICE_REQUEST_STREAM_H_

#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/scheduler/request.h"

namespace tandem::coordinator {

class RequestStream {
 public:
  // What the consumer takes in one Wait: the pending deltas (by index) and,
  // once the request is over, its output.
  struct Batch {
    std::vector<CompletionDelta> deltas;
    std::optional<RequestOutput> finished;
  };

  // Producer side (scheduler thread).
  void PushDelta(const CompletionDelta& delta);
  void PushFinished(const RequestOutput& output);

  // Consumer side. Waits until something is pending or `deadline` passes;
  // returns what is pending (possibly nothing on timeout). After the finished
  // output was returned once, further calls return an empty batch at once.
  Batch Wait(absl::Time deadline);

 private:
  bool HasPending() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return !pending_.empty() || (finished_.has_value() && !finished_taken_);
  }

  absl::Mutex mutex_;
  std::map<int32_t, CompletionDelta> pending_ ABSL_GUARDED_BY(mutex_);
  std::optional<RequestOutput> finished_ ABSL_GUARDED_BY(mutex_);
  bool finished_taken_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_REQUEST_STREAM_H_
