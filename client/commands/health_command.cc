#include "client/commands/health_command.h"

#include <cstdio>

#include "absl/time/clock.h"

namespace tandem::client {

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
      CheckHealth(o.addr, o.service, absl::Now() + absl::Seconds(o.timeout_s),
                  HealthTls{.enabled = !o.tls_ca.empty(), .ca_file = o.tls_ca,
                            .skip_verification = false});
  if (!status.ok()) {
    std::fprintf(stderr, "tandem health: %s\n", status.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", status->c_str());
  std::fflush(stdout);
  return *status == "SERVING" ? 0 : 1;
}

}  // namespace tandem::client
