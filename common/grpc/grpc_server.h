// StartGrpcServer: how every tandem server process (tandem-worker,
// tandem-draft, tandem-coordinator) listens: one port on HOST:PORT (port 0:
// the OS picks), plaintext or, given TlsCredentials (the coordinator's
// --tls-cert / --tls-key), TLS only with no client certificate asked for;
// grpc.health.v1 and server reflection enabled,
// messages up to 256 MiB (a step of many long prompts exceeds gRPC's 4 MiB
// default), and the server plus its named services marked SERVING.
// Synchronous and callback-API services alike: a callback service's reactions
// run on gRPC's own callback threads, never on the synchronous thread pool
// (which serves only synchronous services, e.g. reflection).
//
// Thread-safety: call from the main thread before serving.
#ifndef TANDEM_COMMON_GRPC_GRPC_SERVER_H_
#define TANDEM_COMMON_GRPC_GRPC_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tls/tls_credentials.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

inline constexpr int kMaxGrpcMessageBytes = 256 << 20;

struct GrpcServer {
  std::unique_ptr<grpc::Server> server;
  std::string address;  // HOST:PORT actually bound ([HOST]:PORT for IPv6)
};

// "HOST:PORT", bracketing an IPv6 host.
std::string HostPort(const std::string& host, int port);

// Starts a server for `services` (which must outlive it), over TLS when
// `tls` is enabled. `health_names` are service names reported SERVING
// besides the server itself. UNAVAILABLE naming HOST:PORT when it cannot
// listen there (or gRPC refuses the TLS credentials: the files are named).
absl::StatusOr<GrpcServer> StartGrpcServer(const std::string& host, int port,
                                           const std::vector<grpc::Service*>& services,
                                           const std::vector<std::string>& health_names = {},
                                           const TlsCredentials& tls = TlsCredentials());

}  // namespace tandem

#endif  // TANDEM_COMMON_GRPC_GRPC_SERVER_H_
