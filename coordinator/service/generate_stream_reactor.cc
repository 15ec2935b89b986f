#include "coordinator/service/generate_stream_reactor.h"

#include <utility>

#include "common/grpc/grpc_status.h"

namespace tandem::coordinator {

GenerateStreamReactor::GenerateStreamReactor(grpc::CallbackServerContext* context,
                                             protocol::OutputFormat format, RequestAdmission* admission)
    : AdmittedCall(context, std::move(format), admission) {}

void GenerateStreamReactor::OnDelta(const CompletionDelta& delta) {
  {
    absl::MutexLock lock(&mutex_);
    if (finishing_) return;
    stream_.PushDelta(delta);
  }
  MaybeWrite();
}

void GenerateStreamReactor::OnFinished(const RequestOutput& output) {
  {
    absl::MutexLock lock(&mutex_);
    if (finishing_) return;
    stream_.PushFinished(output);
  }
  MaybeWrite();
}

void GenerateStreamReactor::MaybeWrite() {
  std::optional<grpc::Status> final_status;
  {
    absl::MutexLock lock(&mutex_);
    if (write_in_flight_ || finishing_ || !stream_.HasPending()) return;
    RequestStream::Batch batch = stream_.Take();
    const RequestOutput* done = batch.finished.has_value() ? &*batch.finished : nullptr;
    response_.Clear();
    protocol::FillStreamResponse(batch.deltas, done, format_, &response_);
    if (done != nullptr) {
      finishing_ = true;
      final_status = ToGrpcStatus(done->status);
    } else {
      write_in_flight_ = true;
    }
  }
  if (final_status.has_value()) {
    StartWriteAndFinish(&response_, grpc::WriteOptions(), *std::move(final_status));
  } else {
    StartWrite(&response_);
  }
}

void GenerateStreamReactor::OnWriteDone(bool ok) {
  std::optional<grpc::Status> finish;
  {
    absl::MutexLock lock(&mutex_);
    write_in_flight_ = false;
    finish = std::exchange(finish_after_write_, std::nullopt);
  }
  if (finish.has_value()) {
    Finish(*std::move(finish));
  } else if (!ok) {
    Abort(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
  } else {
    MaybeWrite();
  }
}

void GenerateStreamReactor::OnCancel() { Abort(ClientGoneStatus(*context_)); }

void GenerateStreamReactor::Abort(grpc::Status status) {
  std::optional<AdmittedRequest> to_cancel;
  bool finish_now = false;
  {
    absl::MutexLock lock(&mutex_);
    if (finishing_) return;
    finishing_ = true;
    if (admitted_.has_value() && !stream_.finished()) to_cancel = admitted_;
    if (write_in_flight_) {
      finish_after_write_ = status;
    } else {
      finish_now = true;
    }
  }
  if (to_cancel.has_value()) to_cancel->Cancel(status.error_message());
  if (finish_now) Finish(std::move(status));
}

}  // namespace tandem::coordinator
