#include "client/health_check.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "tandem/client.h"

namespace tandem::client {
namespace {

namespace health_pb = grpc::health::v1;

// HealthTls::skip_verification: one Check over TLS that accepts any
// certificate for any name (gRPC's TLS credentials with a no-op verifier;
// the SDK, rightly, offers no such thing).
absl::StatusOr<std::string> CheckHealthUnverified(const std::string& addr,
                                                  const std::string& service,
                                                  absl::Time deadline) {
  grpc::experimental::TlsChannelCredentialsOptions tls;
  tls.set_verify_server_certs(false);
  tls.set_check_call_host(false);
  tls.set_certificate_verifier(
      std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(addr, grpc::experimental::TlsCredentials(tls));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  health_pb::HealthCheckRequest request;
  request.set_service(service);
  health_pb::HealthCheckResponse response;
  const grpc::Status s = health_pb::Health::NewStub(channel)->Check(&context, request, &response);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrFormat("health check of %s: %s", addr, s.error_message()));
  }
  return health_pb::HealthCheckResponse::ServingStatus_Name(response.status());
}

}  // namespace

absl::StatusOr<std::string> CheckHealth(const std::string& addr, const std::string& service,
                                        absl::Time deadline, const HealthTls& tls) {
  if (tls.enabled && tls.skip_verification) return CheckHealthUnverified(addr, service, deadline);
  // One attempt: callers poll, and a probe says what the server answers now.
  tandem::ClientOptions options;
  options.tls = tls.enabled;
  options.tls_ca_file = tls.ca_file;
  options.timeout = std::max(std::chrono::milliseconds(1),
                             absl::ToChronoMilliseconds(deadline - absl::Now()));
  options.retry.max_retries = 0;
  absl::StatusOr<tandem::ServingStatus> status = tandem::Client(addr, options).Health(service);
  if (!status.ok()) {
    return absl::Status(status.status().code(), absl::StrFormat("health check of %s: %s", addr,
                                                                status.status().message()));
  }
  return std::string(tandem::ServingStatusName(*status));
}

}  // namespace tandem::client
