// `tandem health`: asks a tandem server (coordinator or worker) for its
// grpc.health.v1 status and prints it (SERVING, NOT_SERVING, ...).
#ifndef TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::client {

// How a health check reaches the server: plaintext (the default), or TLS.
struct HealthTls {
  bool enabled = false;
  std::string ca_file;  // the PEM CA the server's certificate must chain to; "" = system roots
  // Encrypts without checking the server's certificate at all. Only for
  // `tandem up`'s probe of the coordinator it started itself on loopback: it
  // holds that server's certificate but not necessarily its CA, and the
  // probe carries no key and no data.
  bool skip_verification = false;
};

struct HealthOptions {
  std::string addr;     // the server, HOST:PORT
  std::string service;  // "" = the server as a whole
  int32_t timeout_s = 5;  // RPC deadline, >= 1
  std::string tls_ca;   // TLS trusting this PEM CA file; "" = plaintext
};

// One Health/Check call to `addr` about `service` ("" = the whole server),
// bounded by `deadline`, over `tls`. Returns the status name ("SERVING",
// "NOT_SERVING", "UNKNOWN", "SERVICE_UNKNOWN"); a failed RPC (unreachable,
// or TLS on one side only: UNAVAILABLE or DEADLINE_EXCEEDED; unknown
// service: NOT_FOUND; an unreadable CA file: NOT_FOUND naming it) is the
// error, naming the address.
absl::StatusOr<std::string> CheckHealth(const std::string& addr, const std::string& service,
                                        absl::Time deadline, const HealthTls& tls = {});

// Prints the status to stdout. Returns the process exit code: 0 only when
// SERVING; 1 for any other status or a failed call (the reason on stderr);
// 2 for invalid options.
int HealthCommand(const HealthOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_
