// `tandem health`: asks a tandem server (coordinator or worker) for its
// grpc.health.v1 status and prints it (SERVING, NOT_SERVING, ...).
#ifndef TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_

#include <cstdint>
#include <string>

#include "client/health_check.h"

namespace tandem::client {

struct HealthOptions {
  std::string addr;     // the server, HOST:PORT
  std::string service;  // "" = the server as a whole
  int32_t timeout_s = 5;  // RPC deadline, >= 1
  std::string tls_ca;   // TLS trusting this PEM CA file; "" = plaintext
};

// Prints the status to stdout. Returns the process exit code: 0 only when
// SERVING; 1 for any other status or a failed call (the reason on stderr);
// 2 for invalid options.
int HealthCommand(const HealthOptions& options);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_HEALTH_COMMAND_H_
