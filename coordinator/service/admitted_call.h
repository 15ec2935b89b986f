// AdmittedCall<Reactor>: what the Generate reactors (GenerateStreamReactor,
// GenerateUnaryReactor) share — the call's context, response format and
// RequestAdmission; the admitted request and the `finishing_` flag with the mutex that
// guards them (and the derived reactor's own state); Start, which ends a call
// whose request was refused; and OnDone, which releases the request's
// results and deletes the reactor. Also how a call whose client went away is
// ended (ClientGoneStatus).
//
// Thread-safety: as the derived reactors: gRPC reactions and the registry's
// deliveries run concurrently, under mutex_; gRPC calls are made outside it.
#ifndef TANDEM_COORDINATOR_SERVICE_ADMITTED_CALL_H_
#define TANDEM_COORDINATOR_SERVICE_ADMITTED_CALL_H_

#include <chrono>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/grpc_status.h"
#include "coordinator/api/request.h"
#include "coordinator/service/admitted_request.h"
#include "coordinator/service/request_admission.h"
#include "grpcpp/grpcpp.h"
#include "protocol/generate_response_codec.h"

namespace tandem::coordinator {

// The status that ends a call whose client is gone (gRPC cancelled it):
// DEADLINE_EXCEEDED once the call's deadline passed or is at most 250 ms away
// (gRPC cancels a call at its deadline, the client's copy first), CANCELLED
// otherwise.
inline grpc::Status ClientGoneStatus(const grpc::CallbackServerContext& context) {
  // A client cancels its call at its deadline, and that cancel usually
  // arrives before the server's copy of the deadline passes: gRPC sends the
  // time left, so the server's copy lags by the headers' transit time. A
  // cancel this close to the deadline is the deadline's.
  constexpr std::chrono::milliseconds kDeadlineSlack(250);
  if (context.deadline() - kDeadlineSlack <= std::chrono::system_clock::now()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the request's deadline passed before it finished");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the request");
}

template <typename Reactor>
class AdmittedCall : public Reactor, public RequestObserver {
 public:
  // The outcome of admitting the call's request, once, before the handler
  // returns: an admitted request (already in the registry with this reactor
  // as its observer) runs; a refused one ends the call with its status.
  void Start(absl::StatusOr<AdmittedRequest> admitted) {
    if (!admitted.ok()) {
      {
        absl::MutexLock lock(&mutex_);
        finishing_ = true;
      }
      this->Finish(ToGrpcStatus(admitted.status()));
      return;
    }
    absl::MutexLock lock(&mutex_);
    admitted_ = *std::move(admitted);
  }

  void OnDone() override {
    std::optional<RequestId> id;
    {
      absl::MutexLock lock(&mutex_);
      if (admitted_.has_value()) id = admitted_->id;
    }
    if (id.has_value()) admission_->Release(*id);
    delete this;
  }

 protected:
  // `context` is the call's; `admission` must outlive the call.
  AdmittedCall(grpc::CallbackServerContext* context, protocol::OutputFormat format,
               RequestAdmission* admission)
      : context_(context), format_(std::move(format)), admission_(admission) {}

  grpc::CallbackServerContext* const context_;
  const protocol::OutputFormat format_;
  RequestAdmission* const admission_;

  absl::Mutex mutex_;
  std::optional<AdmittedRequest> admitted_ ABSL_GUARDED_BY(mutex_);
  // Set when the call's Finish is decided; nothing is sent after.
  bool finishing_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_ADMITTED_CALL_H_
