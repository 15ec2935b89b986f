#include "coordinator/service/admitted_request.h"

#include <chrono>

#include "common/logging.h"

namespace tandem::coordinator {

void AdmittedRequest::Cancel(const grpc::Status& why) const {
  TANDEM_LOG(kInfo, "request %d: %s", id.value(), why.error_message());
  group->loop->Cancel(id);
}

grpc::Status ClientGoneStatus(const grpc::CallbackServerContext& context) {
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

}  // namespace tandem::coordinator
