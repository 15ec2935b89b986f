// One grpc.health.v1 Check of a tandem server (coordinator, worker group or
// draft worker): what `tandem health` prints and what `tandem up`'s
// supervisor polls.
#ifndef TANDEM_CLIENT_HEALTH_CHECK_H_
#define TANDEM_CLIENT_HEALTH_CHECK_H_

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

// One Health/Check call to `addr` about `service` ("" = the whole server),
// bounded by `deadline`, over `tls`. Returns the status name ("SERVING",
// "NOT_SERVING", "UNKNOWN", "SERVICE_UNKNOWN"); a failed RPC (unreachable,
// or TLS on one side only: UNAVAILABLE or DEADLINE_EXCEEDED; unknown
// service: NOT_FOUND; an unreadable CA file: NOT_FOUND naming it) is the
// error, naming the address.
absl::StatusOr<std::string> CheckHealth(const std::string& addr, const std::string& service,
                                        absl::Time deadline, const HealthTls& tls = {});

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_HEALTH_CHECK_H_
