// Where the coordinator finds its worker groups and draft workers. A target
// is one of
//   HOST:PORT                    one fixed address (gRPC resolves HOST itself)
//   dns:///NAME:PORT             every address NAME resolves to through the
//                                system resolver (/etc/hosts, then DNS), as a
//                                Kubernetes headless Service gives one A record
//                                per ready pod
//   dns://SERVER[:DNSPORT]/NAME:PORT
//                                the same, asking the DNS server SERVER (an
//                                IPv4 address; DNSPORT defaults to 53) directly
// The dns forms are re-resolved by Discovery, so the set they name may change.
//
// Thread-safety: free functions without shared state.
#ifndef TANDEM_COORDINATOR_CLUSTER_TARGET_RESOLVER_H_
#define TANDEM_COORDINATOR_CLUSTER_TARGET_RESOLVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::coordinator {

struct Target {
  std::string spec;          // as given, for messages
  bool dns = false;          // a dns:// target (re-resolved) or a fixed address
  std::string host;          // the name to resolve, or the fixed host
  int32_t port = 0;          // the servers' port
  std::string dns_server;    // dns://SERVER/ form: the server's IPv4 address; "" = system
  int32_t dns_server_port = 53;
};

// Parses one target. INVALID_ARGUMENT naming the spec and what is expected
// (missing or non-numeric port, port outside [1, 65535], empty name, an
// authority that is not IPV4[:PORT]).
absl::StatusOr<Target> ParseTarget(absl::string_view spec);
// Parses a comma-separated list (empty entries skipped). INVALID_ARGUMENT as
// ParseTarget; an empty list is valid (no targets).
absl::StatusOr<std::vector<Target>> ParseTargetList(absl::string_view list);

// The addresses ("IP:PORT", "[IPV6]:PORT") a target names now, sorted and
// without duplicates; a fixed target gives itself ("HOST:PORT"). NOT_FOUND
// when the name exists nowhere or has no addresses (a Service without ready
// pods); UNAVAILABLE when the resolver fails (timeout, server failure): the
// caller keeps what it knew.
absl::StatusOr<std::vector<std::string>> ResolveTarget(const Target& target);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_TARGET_RESOLVER_H_
