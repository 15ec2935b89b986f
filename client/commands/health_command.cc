#include "client/commands/health_command.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace tandem::client {
namespace {

namespace health_pb = grpc::health::v1;

// grpc::StatusCode → absl::StatusCode: the numeric values are the same by
// design (both follow google.rpc.Code).
absl::Status FromGrpc(const grpc::Status& s, const std::string& addr) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrFormat("health check of %s: %s", addr, s.error_message()));
}

}  // namespace

absl::StatusOr<std::string> CheckHealth(const std::string& addr, const std::string& service,
                                        absl::Time deadline) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  std::unique_ptr<health_pb::Health::Stub> stub = health_pb::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  health_pb::HealthCheckRequest request;
  request.set_service(service);
  health_pb::HealthCheckResponse response;
  const grpc::Status s = stub->Check(&context, request, &response);
  if (!s.ok()) return FromGrpc(s, addr);
  return health_pb::HealthCheckResponse::ServingStatus_Name(response.status());
}

int HealthCommand(const HealthOptions& o) {
  if (o.addr.empty()) {
    std::fprintf(stderr, "tandem health: --addr HOST:PORT is required\n");
    return 2;
  }
  if (o.timeout_s < 1) {
    std::fprintf(stderr, "tandem health: --timeout-s %d is out of range: must be >= 1\n",
                 o.timeout_s);
    return 2;
  }
  absl::StatusOr<std::string> status =
      CheckHealth(o.addr, o.service, absl::Now() + absl::Seconds(o.timeout_s));
  if (!status.ok()) {
    std::fprintf(stderr, "tandem health: %s\n", status.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", status->c_str());
  std::fflush(stdout);
  return *status == "SERVING" ? 0 : 1;
}

}  // namespace tandem::client
