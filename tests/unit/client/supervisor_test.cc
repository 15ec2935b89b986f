#include "client/supervisor.h"

#include "gtest/gtest.h"

namespace tandem::client {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(RestartBackoffTest, DoublesFromInitialUpToMax) {
  RestartBackoff backoff;  // 0.5 s doubling to 10 s
  const absl::Duration expected[] = {absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2),
                                     absl::Seconds(4),        absl::Seconds(8), absl::Seconds(10),
                                     absl::Seconds(10)};
  absl::Time t = kT0;
  int32_t attempt = 0;
  for (absl::Duration want : expected) {
    EXPECT_EQ(backoff.NextDelay(t, t + absl::Seconds(1)), want);
    EXPECT_EQ(backoff.attempt(), ++attempt);
    t += absl::Seconds(5);
  }
}

TEST(RestartBackoffTest, ALongRunStartsOver) {
  RestartBackoff backoff({.initial = absl::Seconds(1), .max = absl::Seconds(30),
                          .reset_after = absl::Seconds(60)});
  EXPECT_EQ(backoff.NextDelay(kT0, kT0 + absl::Seconds(1)), absl::Seconds(1));
  EXPECT_EQ(backoff.NextDelay(kT0, kT0 + absl::Seconds(59)), absl::Seconds(2));
  EXPECT_EQ(backoff.NextDelay(kT0, kT0 + absl::Seconds(59)), absl::Seconds(4));
  EXPECT_EQ(backoff.attempt(), 3);
  // Up for a full minute: the next crash is the first again.
  EXPECT_EQ(backoff.NextDelay(kT0, kT0 + absl::Seconds(60)), absl::Seconds(1));
  EXPECT_EQ(backoff.attempt(), 1);
}

TEST(RestartBackoffTest, ManyCrashesStayAtMax) {
  RestartBackoff backoff;
  absl::Duration last;
  for (int i = 0; i < 1000; ++i) last = backoff.NextDelay(kT0, kT0);
  EXPECT_EQ(last, absl::Seconds(10));
  EXPECT_EQ(backoff.attempt(), 1000);
}

TEST(CrashWindowTest, GivesUpAtMaxCrashesWithinTheWindow) {
  CrashWindow window(3, absl::Seconds(60));
  EXPECT_FALSE(window.Record(kT0));
  EXPECT_FALSE(window.Record(kT0 + absl::Seconds(30)));
  EXPECT_TRUE(window.Record(kT0 + absl::Seconds(60)));
  EXPECT_EQ(window.recent(), 3);
}

TEST(CrashWindowTest, CrashesOutsideTheWindowAreForgotten) {
  CrashWindow window(3, absl::Seconds(60));
  EXPECT_FALSE(window.Record(kT0));
  EXPECT_FALSE(window.Record(kT0 + absl::Seconds(50)));
  // The first is now 61 s old: two within the window.
  EXPECT_FALSE(window.Record(kT0 + absl::Seconds(61)));
  EXPECT_EQ(window.recent(), 2);
  EXPECT_TRUE(window.Record(kT0 + absl::Seconds(70)));
}

TEST(CrashWindowTest, OneCrashAllowedMeansTheFirstGivesUp) {
  CrashWindow window(1, absl::Seconds(60));
  EXPECT_TRUE(window.Record(kT0));
}

TEST(SupervisorAddressTest, ParsesTheListeningLine) {
  absl::StatusOr<std::string> a = ParseListeningLine("tandem-worker",
                                                     "tandem-worker listening on 0.0.0.0:4100");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "0.0.0.0:4100");
  EXPECT_EQ(DialAddress(*a), "127.0.0.1:4100");
  EXPECT_EQ(DialAddress("[::]:7"), "127.0.0.1:7");
  EXPECT_EQ(DialAddress("127.0.0.1:9"), "127.0.0.1:9");
  EXPECT_FALSE(ParseListeningLine("tandem-worker", "loading model").ok());
  EXPECT_FALSE(ParseListeningLine("tandem-worker", "tandem-worker listening on ").ok());
}

TEST(SupervisorAddressTest, PortOf) {
  EXPECT_EQ(PortOf("127.0.0.1:4100"), 4100);
  EXPECT_EQ(PortOf("[::1]:80"), 80);
  EXPECT_EQ(PortOf("localhost"), -1);
  EXPECT_EQ(PortOf("host:abc"), -1);
}

}  // namespace
}  // namespace tandem::client
