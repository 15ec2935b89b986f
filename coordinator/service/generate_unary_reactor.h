// GenerateUnaryReactor: one Inference.Generate call on gRPC's callback API;
// no thread waits on it. The service's RequestRegistry reports the request's
// end from the scheduler (RequestObserver); the reactor fills the reply and
// finishes the call with the request's status as a gRPC status (UNAVAILABLE
// for a lost worker group). Deltas are ignored: the reply carries the
// completions in full.
//
// A client that cancels or goes away, or whose deadline passes (gRPC cancels
// the call then: DEADLINE_EXCEEDED), cancels the request in its scheduler
// once, unless it had finished; the call ends at once.
//
// Lifetime: the service's handler creates it, calls Start and returns it to
// gRPC; it deletes itself in OnDone after removing its request from the
// registry, so no result is delivered to it afterwards.
//
// Thread-safety: OnFinished runs on the registry's delivery thread (under its
// observer mutex), OnCancel on a gRPC thread, concurrently; mutex_ guards the
// state they share. Finish is called outside mutex_ and, on gRPC's threads,
// last.
#ifndef TANDEM_COORDINATOR_SERVICE_GENERATE_UNARY_REACTOR_H_
#define TANDEM_COORDINATOR_SERVICE_GENERATE_UNARY_REACTOR_H_

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/service/admitted_call.h"
#include "coordinator/service/admitted_request.h"
#include "protocol/generate_response_codec.h"
#include "coordinator/api/request.h"
#include "coordinator/service/request_admission.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/inference.pb.h"

namespace tandem::coordinator {

class GenerateUnaryReactor final : public AdmittedCall<grpc::ServerUnaryReactor> {
 public:
  // `context` and `response` are the call's; `admission` must outlive the call.
  GenerateUnaryReactor(grpc::CallbackServerContext* context, protocol::OutputFormat format,
                       tandem::v1::GenerateResponse* response, RequestAdmission* admission);

  // RequestObserver (the registry's delivery thread).
  void OnDelta(const CompletionDelta&) override {}
  void OnFinished(const RequestOutput& output) override;

  // gRPC reactions.
  void OnCancel() override;

 private:
  // Final once finishing_ is set.
  tandem::v1::GenerateResponse* const response_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_GENERATE_UNARY_REACTOR_H_
