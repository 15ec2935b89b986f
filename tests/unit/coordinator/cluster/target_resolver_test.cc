// Target parsing and resolution through the system resolver. Resolution
// against an explicit DNS server (dns://SERVER/...) is covered end to end by
// tests/integration/discovery_test.py, which runs a DNS server.
#include "coordinator/cluster/target_resolver.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

TEST(TargetResolverTest, ParsesEveryForm) {
  absl::StatusOr<Target> fixed = ParseTarget("10.0.0.5:7000");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_FALSE(fixed->dns);
  EXPECT_EQ(fixed->host, "10.0.0.5");
  EXPECT_EQ(fixed->port, 7000);

  absl::StatusOr<Target> v6 = ParseTarget("[::1]:7000");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");

  absl::StatusOr<Target> system = ParseTarget("dns:///workers.tandem.svc:7001");
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_TRUE(system->dns);
  EXPECT_EQ(system->host, "workers.tandem.svc");
  EXPECT_EQ(system->port, 7001);
  EXPECT_EQ(system->dns_server, "");

  absl::StatusOr<Target> server = ParseTarget("dns://127.0.0.1:5353/drafts.test:7002");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(server->dns_server, "127.0.0.1");
  EXPECT_EQ(server->dns_server_port, 5353);
  EXPECT_EQ(server->host, "drafts.test");

  absl::StatusOr<Target> default_port = ParseTarget("dns://10.96.0.10/x.test:1");
  ASSERT_TRUE(default_port.ok()) << default_port.status();
  EXPECT_EQ(default_port->dns_server_port, 53);
}

TEST(TargetResolverTest, RejectsMalformedTargetsNamingThem) {
  for (const char* bad :
       {"localhost", "localhost:", "localhost:0", "localhost:70000", "localhost:http", ":7000",
        "http://localhost:7000", "dns:localhost:7000", "dns:///:7000", "dns:///name",
        "dns://dns.example/name:7000", "dns://127.0.0.1:99999/name:7000"}) {
    absl::StatusOr<Target> t = ParseTarget(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(t.status().message().find(bad), std::string::npos) << t.status();
  }
}

TEST(TargetResolverTest, ParsesLists) {
  absl::StatusOr<std::vector<Target>> list =
      ParseTargetList("127.0.0.1:1, dns:///localhost:2 ,,");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].host, "localhost");
  EXPECT_TRUE(ParseTargetList("")->empty());
  EXPECT_FALSE(ParseTargetList("127.0.0.1:1,nope").ok());
}

TEST(TargetResolverTest, FixedTargetsResolveToThemselves) {
  absl::StatusOr<std::vector<std::string>> a = ResolveTarget(*ParseTarget("some-host:7000"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, (std::vector<std::string>{"some-host:7000"}));
}

TEST(TargetResolverTest, SystemResolverFindsLocalhost) {
  absl::StatusOr<std::vector<std::string>> a = ResolveTarget(*ParseTarget("dns:///localhost:7000"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(std::find(a->begin(), a->end(), "127.0.0.1:7000") != a->end())
      << "localhost resolved to " << a->size() << " addresses";
  EXPECT_TRUE(std::is_sorted(a->begin(), a->end()));
}

TEST(TargetResolverTest, UnknownNamesAreNotFoundOrUnavailable) {
  // .invalid never resolves (RFC 6761); without any DNS server configured
  // the resolver may report a temporary failure instead.
  absl::StatusOr<std::vector<std::string>> a =
      ResolveTarget(*ParseTarget("dns:///no-such-replica.invalid:7000"));
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::IsNotFound(a.status()) || absl::IsUnavailable(a.status())) << a.status();
  EXPECT_NE(a.status().message().find("no-such-replica.invalid"), std::string::npos) << a.status();
}

}  // namespace
}  // namespace tandem::coordinator
