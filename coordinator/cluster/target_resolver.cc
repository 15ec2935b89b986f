#include "coordinator/cluster/target_resolver.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tandem::coordinator {
namespace {

constexpr absl::string_view kDnsScheme = "dns://";

// Splits "HOST:PORT" / "[V6]:PORT" into host (brackets removed) and port.
absl::Status SplitHostPort(absl::string_view hostport, absl::string_view spec, std::string* host,
                           int32_t* port) {
  const size_t colon = hostport.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "target '%s' has no HOST:PORT: expected HOST:PORT, dns:///NAME:PORT or "
        "dns://DNS-SERVER/NAME:PORT",
        spec));
  }
  absl::string_view h = hostport.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("target '%s' has an empty host name", spec));
  }
  int32_t p = 0;
  if (!absl::SimpleAtoi(hostport.substr(colon + 1), &p) || p < 1 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "target '%s' has port '%s': must be a number in [1, 65535]", spec,
        hostport.substr(colon + 1)));
  }
  *host = std::string(h);
  *port = p;
  return absl::OkStatus();
}

std::string JoinHostPort(const std::string& ip, int32_t port, bool v6) {
  return v6 ? absl::StrFormat("[%s]:%d", ip, port) : absl::StrFormat("%s:%d", ip, port);
}

// System resolver (getaddrinfo: /etc/hosts, DNS with search domains).
absl::StatusOr<std::vector<std::string>> ResolveWithSystem(const Target& target) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(target.host.c_str(), nullptr, &hints, &found);
  if (rc == EAI_NONAME || rc == EAI_NODATA) {
    return absl::NotFoundError(
        absl::StrFormat("target '%s': name '%s' has no address", target.spec, target.host));
  }
  if (rc != 0) {
    return absl::UnavailableError(absl::StrFormat("target '%s': resolving '%s' failed: %s",
                                                  target.spec, target.host, gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr, ip,
                sizeof ip);
      out.push_back(JoinHostPort(ip, target.port, false));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr, ip,
                sizeof ip);
      out.push_back(JoinHostPort(ip, target.port, true));
    }
  }
  freeaddrinfo(found);
  return out;
}

// One query (A or AAAA) against the target's DNS server; appends the
// addresses. Returns NOT_FOUND for NXDOMAIN / no records of that type.
absl::Status QueryServer(const Target& target, int type, std::vector<std::string>* out) {
  struct __res_state state;
  std::memset(&state, 0, sizeof state);
  if (res_ninit(&state) != 0) {
    return absl::UnavailableError(
        absl::StrFormat("target '%s': cannot initialize the DNS resolver", target.spec));
  }
  state.nscount = 1;
  state.nsaddr_list[0].sin_family = AF_INET;
  state.nsaddr_list[0].sin_port = htons(static_cast<uint16_t>(target.dns_server_port));
  inet_pton(AF_INET, target.dns_server.c_str(), &state.nsaddr_list[0].sin_addr);
  state.retrans = 1;  // seconds per try
  state.retry = 2;
  unsigned char answer[4096];
  const int n = res_nquery(&state, target.host.c_str(), ns_c_in, type, answer, sizeof answer);
  const int h_error = state.res_h_errno;
  res_nclose(&state);
  if (n < 0) {
    if (h_error == HOST_NOT_FOUND || h_error == NO_DATA) {
      return absl::NotFoundError(absl::StrFormat("target '%s': DNS server %s:%d has no %s record",
                                                 target.spec, target.dns_server,
                                                 target.dns_server_port,
                                                 type == ns_t_a ? "A" : "AAAA"));
    }
    return absl::UnavailableError(absl::StrFormat(
        "target '%s': DNS server %s:%d did not answer (%s)", target.spec, target.dns_server,
        target.dns_server_port, hstrerror(h_error)));
  }
  ns_msg msg;
  if (ns_initparse(answer, n, &msg) != 0) {
    return absl::UnavailableError(absl::StrFormat(
        "target '%s': malformed answer from DNS server %s:%d", target.spec, target.dns_server,
        target.dns_server_port));
  }
  const int count = ns_msg_count(msg, ns_s_an);
  for (int i = 0; i < count; ++i) {
    ns_rr rr;
    if (ns_parserr(&msg, ns_s_an, i, &rr) != 0) continue;
    char ip[INET6_ADDRSTRLEN] = {};
    if (ns_rr_type(rr) == ns_t_a && ns_rr_rdlen(rr) == 4) {
      inet_ntop(AF_INET, ns_rr_rdata(rr), ip, sizeof ip);
      out->push_back(JoinHostPort(ip, target.port, false));
    } else if (ns_rr_type(rr) == ns_t_aaaa && ns_rr_rdlen(rr) == 16) {
      inet_ntop(AF_INET6, ns_rr_rdata(rr), ip, sizeof ip);
      out->push_back(JoinHostPort(ip, target.port, true));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ResolveWithServer(const Target& target) {
  std::vector<std::string> out;
  bool any_found = false;
  for (int type : {ns_t_a, ns_t_aaaa}) {
    absl::Status s = QueryServer(target, type, &out);
    if (s.ok()) {
      any_found = true;
    } else if (!absl::IsNotFound(s)) {
      return s;
    }
  }
  if (!any_found || out.empty()) {
    return absl::NotFoundError(absl::StrFormat("target '%s': DNS server %s:%d has no address for '%s'",
                                               target.spec, target.dns_server,
                                               target.dns_server_port, target.host));
  }
  return out;
}

}  // namespace

absl::StatusOr<Target> ParseTarget(absl::string_view spec) {
  Target t;
  t.spec = std::string(spec);
  absl::string_view rest = spec;
  if (absl::ConsumePrefix(&rest, kDnsScheme)) {
    t.dns = true;
    const size_t slash = rest.find('/');
    if (slash == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "target '%s' is not dns:///NAME:PORT or dns://DNS-SERVER/NAME:PORT", spec));
    }
    absl::string_view authority = rest.substr(0, slash);
    rest = rest.substr(slash + 1);
    if (!authority.empty()) {
      std::vector<absl::string_view> parts = absl::StrSplit(authority, ':');
      in_addr probe;
      const std::string server(parts[0]);
      if (parts.size() > 2 || inet_pton(AF_INET, server.c_str(), &probe) != 1) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "target '%s': DNS server '%s' must be an IPv4 address with an optional :PORT", spec,
            authority));
      }
      t.dns_server = server;
      if (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &t.dns_server_port) ||
                                t.dns_server_port < 1 || t.dns_server_port > 65535)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "target '%s': DNS server port '%s' must be a number in [1, 65535]", spec, parts[1]));
      }
    }
  } else if (rest.find("://") != absl::string_view::npos || absl::StartsWith(rest, "dns:")) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "target '%s' has an unknown scheme: expected HOST:PORT, dns:///NAME:PORT or "
        "dns://DNS-SERVER/NAME:PORT",
        spec));
  }
  if (absl::Status s = SplitHostPort(rest, spec, &t.host, &t.port); !s.ok()) return s;
  return t;
}

absl::StatusOr<std::vector<Target>> ParseTargetList(absl::string_view list) {
  std::vector<Target> targets;
  for (absl::string_view spec : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    absl::StatusOr<Target> t = ParseTarget(absl::StripAsciiWhitespace(spec));
    if (!t.ok()) return t.status();
    targets.push_back(*std::move(t));
  }
  return targets;
}

absl::StatusOr<std::vector<std::string>> ResolveTarget(const Target& target) {
  std::vector<std::string> out;
  if (!target.dns) {
    out.push_back(target.spec);
  } else {
    absl::StatusOr<std::vector<std::string>> resolved =
        target.dns_server.empty() ? ResolveWithSystem(target) : ResolveWithServer(target);
    if (!resolved.ok()) return resolved.status();
    out = *std::move(resolved);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace tandem::coordinator
