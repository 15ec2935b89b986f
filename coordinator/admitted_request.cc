#include "coordinator/admitted_request.h"

#include <chrono>

#include "common/logging.h"

namespace tandem::coordinator {

void AdmittedRequest::Cancel(const grpc::Status& why) const {
  TANDEM_LOG(kInfo, "request %d: %s", id.value(), why.error_message());
  group->loop->Cancel(id);
}

grpc::Status ClientGoneStatus(const grpc::CallbackServerContext& context) {
  if (context.deadline() <= std::chrono::system_clock::now()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the request's deadline passed before it finished");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the request");
}

}  // namespace tandem::coordinator
