// absl::Status → grpc::Status, used only at the service edges (*_service.cc;
// DESIGN.md "Errors"). absl and gRPC share the canonical code numbering; the
// mapping is spelled out so the codes each service promises are visible here.
#ifndef TANDEM_COMMON_GRPC_GRPC_STATUS_H_
#define TANDEM_COMMON_GRPC_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tandem {

grpc::StatusCode ToGrpcCode(absl::StatusCode code);
// The same code and message; OK stays OK.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace tandem

#endif  // TANDEM_COMMON_GRPC_GRPC_STATUS_H_
