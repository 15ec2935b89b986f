// GenerateStreamReactor: one Inference.GenerateStream call on gRPC's callback
// API; no thread waits on it. The service's RequestRegistry hands it the
// request's results from the scheduler (RequestObserver); it buffers them in
// a RequestStream and keeps at most one write in flight: a result that
// arrives while none is starts one at once, and what arrives meanwhile goes
// out as one message when that write completes. The last
// message carries the request's output and goes out with the call's status:
// the request's status as a gRPC status (UNAVAILABLE for a lost worker group).
//
// A client that cancels or goes away, or whose deadline passes (gRPC cancels
// the call then: DEADLINE_EXCEEDED), cancels the request in its scheduler
// once, unless the request had finished; the call ends at once.
//
// Lifetime: the service's handler creates it, calls Start and returns it to
// gRPC; it deletes itself in OnDone after removing its request from the
// registry, so no result is delivered to it afterwards.
//
// Thread-safety: OnDelta / OnFinished run on the registry's delivery thread
// (under its observer mutex; they never wait on the client), the gRPC
// reactions on gRPC's threads, concurrently; mutex_ guards the state they
// share. gRPC calls (StartWrite, Finish) are made outside mutex_ and, on
// gRPC's threads, last: OnDone may run (and delete the reactor) as soon as
// they return.
#ifndef TANDEM_COORDINATOR_SERVICE_GENERATE_STREAM_REACTOR_H_
#define TANDEM_COORDINATOR_SERVICE_GENERATE_STREAM_REACTOR_H_

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/service/admitted_call.h"
#include "coordinator/service/admitted_request.h"
#include "protocol/generate_response_codec.h"
#include "coordinator/api/request.h"
#include "coordinator/service/request_admission.h"
#include "coordinator/service/request_stream.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/inference.pb.h"

namespace tandem::coordinator {

class GenerateStreamReactor final
    : public AdmittedCall<grpc::ServerWriteReactor<tandem::v1::GenerateStreamResponse>> {
 public:
  // `context` is the call's; `admission` must outlive the call.
  GenerateStreamReactor(grpc::CallbackServerContext* context, protocol::OutputFormat format,
                        RequestAdmission* admission);

  // RequestObserver (the registry's delivery thread).
  void OnDelta(const CompletionDelta& delta) override;
  void OnFinished(const RequestOutput& output) override;

  // gRPC reactions.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;

 private:
  // Starts a write of everything pending (with Finish when the output is
  // among it) unless a write is in flight or the call is finishing.
  void MaybeWrite();
  // Ends the call early with `status` (the client is gone): cancels the
  // request unless it finished, then finishes the call, after the write in
  // flight completes if there is one. Idempotent.
  void Abort(grpc::Status status);

  RequestStream stream_ ABSL_GUARDED_BY(mutex_);
  bool write_in_flight_ ABSL_GUARDED_BY(mutex_) = false;
  // Finish waiting for the write in flight (Abort during a write).
  std::optional<grpc::Status> finish_after_write_ ABSL_GUARDED_BY(mutex_);
  // The message gRPC is writing. Filled under mutex_ by the thread that sets
  // write_in_flight_ (or finishing_); gRPC reads it without the mutex until
  // OnWriteDone (OnDone after a write-and-finish), and nothing touches it
  // meanwhile.
  tandem::v1::GenerateStreamResponse response_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_GENERATE_STREAM_REACTOR_H_
