#include "coordinator/service/generate_unary_reactor.h"

#include <utility>

#include "common/grpc/grpc_status.h"

namespace tandem::coordinator {

GenerateUnaryReactor::GenerateUnaryReactor(grpc::CallbackServerContext* context,
                                           protocol::OutputFormat format,
                                           tandem::v1::GenerateResponse* response,
                                           RequestAdmission* admission)
    : AdmittedCall(context, std::move(format), admission), response_(response) {}

void GenerateUnaryReactor::OnFinished(const RequestOutput& output) {
  {
    absl::MutexLock lock(&mutex_);
    if (finishing_) return;
    finishing_ = true;
    protocol::FillGenerateResponse(output, format_, response_);
  }
  Finish(ToGrpcStatus(output.status));
}

void GenerateUnaryReactor::OnCancel() {
  const grpc::Status status = ClientGoneStatus(*context_);
  std::optional<AdmittedRequest> to_cancel;
  {
    absl::MutexLock lock(&mutex_);
    if (finishing_) return;
    finishing_ = true;
    to_cancel = admitted_;
  }
  if (to_cancel.has_value()) to_cancel->Cancel(status.error_message());
  Finish(status);
}

}  // namespace tandem::coordinator
