// `tandem health`: asks a tandem server (coordinator or worker) for its
// grpc.health.v1 status and prints it (SERVING, NOT_SERVING, ...).
#ifndef TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::client {

struct HealthOptions {
  std::string addr;     // the server, HOST:PORT
  std::string service;  // "" = the server as a whole
  int32_t timeout_s = 5;  // RPC deadline, >= 1
};

// One Health/Check call to `addr` about `service` ("" = the whole server),
// bounded by `deadline`. Returns the status name ("SERVING", "NOT_SERVING",
// "UNKNOWN", "SERVICE_UNKNOWN"); a failed RPC (unreachable: UNAVAILABLE or
// DEADLINE_EXCEEDED; unknown service: NOT_FOUND) is the error, naming the
// address.
absl::StatusOr<std::string> CheckHealth(const std::string& addr, const std::string& service,
                                        absl::Time deadline);

// Prints the status to stdout. Returns the process exit code: 0 only when
// SERVING; 1 for any other status or a failed call (the reason on stderr);
// 2 for invalid options.
int HealthCommand(const HealthOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_
