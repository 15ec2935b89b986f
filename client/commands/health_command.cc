#include "client/commands/health_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tandem/client.h"

namespace tandem::client {

absl::StatusOr<std::string> CheckHealth(const std::string& addr, const std::string& service,
                                        absl::Time deadline) {
  // One attempt: callers poll, and a probe says what the server answers now.
  tandem::ClientOptions options;
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
