// RequestStream: the results of one request waiting to be sent to its client:
// what the scheduler produced (through the RequestObserver callbacks)
// since the stream's owner last took a batch, e.g. while a write to the client
// was in flight.
//
// Bounded however slow the client reads: deltas of the same completion index
// are coalesced (text, token ids and logprobs appended; a replacing delta
// replaces), so the buffer holds at most one pending delta per index
// (n <= 128) plus the final output.
//
// Thread-safety: none; the owner guards it (GenerateStreamReactor's mutex).
#ifndef TANDEM_COORDINATOR_SERVICE_REQUEST_STREAM_H_
#define TANDEM_COORDINATOR_SERVICE_REQUEST_STREAM_H_

#include <map>
#include <optional>
#include <vector>

#include "coordinator/api/request.h"

namespace tandem::coordinator {

class RequestStream {
 public:
  // What the owner takes at once: the pending deltas (by index) and, once
  // the request is over, its output.
  struct Batch {
    std::vector<CompletionDelta> deltas;
    std::optional<RequestOutput> finished;
  };

  void PushDelta(const CompletionDelta& delta);
  void PushFinished(const RequestOutput& output);

  // True when Take would return deltas or the final output.
  bool HasPending() const { return !pending_.empty() || finished_.has_value(); }
  // True once the final output was pushed (taken or not).
  bool finished() const { return finished_pushed_; }
  // Everything pending, deltas by index; empties the buffer. The final
  // output is returned once.
  Batch Take();

 private:
  std::map<int32_t, CompletionDelta> pending_;
  std::optional<RequestOutput> finished_;
  bool finished_pushed_ = false;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_REQUEST_STREAM_H_
