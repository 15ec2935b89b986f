#include "common/flags/given_flags.h"

#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

// Flags of this test binary only: GivenFlagNames looks names up in Abseil's
// registry, so the test registers the three kinds it distinguishes.
ABSL_FLAG(int32_t, gf_count, 2, "an int flag (takes the next argument as its value)");
ABSL_FLAG(bool, gf_verbose, false, "a bool flag (never takes the next argument)");
ABSL_FLAG(std::string, gf_name, "", "a string flag");

namespace tandem {
namespace {

std::set<std::string> Given(std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  return GivenFlagNames(args);
}

TEST(GivenFlagNamesTest, EverySpellingOfAValueFlag) {
  EXPECT_EQ(Given({"--gf_count", "2"}), std::set<std::string>{"gf_count"});
  EXPECT_EQ(Given({"--gf_count=2"}), std::set<std::string>{"gf_count"});
  EXPECT_EQ(Given({"-gf_count", "2"}), std::set<std::string>{"gf_count"});
  EXPECT_EQ(Given({"-gf_count=2"}), std::set<std::string>{"gf_count"});
  EXPECT_EQ(Given({"--gf_name="}), std::set<std::string>{"gf_name"});
}

TEST(GivenFlagNamesTest, TheDefaultValueGivenExplicitlyCounts) {
  // gf_count's default is 2: comparing with the default would miss this.
  EXPECT_EQ(Given({"up", "--gf_count", "2"}), std::set<std::string>{"gf_count"});
}

TEST(GivenFlagNamesTest, ANextArgumentValueIsNotAFlag) {
  // "--gf_name --gf_count" sets gf_name to the text "--gf_count".
  EXPECT_EQ(Given({"--gf_name", "--gf_count"}), std::set<std::string>{"gf_name"});
  EXPECT_EQ(Given({"--gf_name", "--gf_verbose", "--gf_count=3"}),
            (std::set<std::string>{"gf_name", "gf_count"}));
}

TEST(GivenFlagNamesTest, BoolFlagsAndTheirNegation) {
  EXPECT_EQ(Given({"--gf_verbose", "--gf_count=1"}),
            (std::set<std::string>{"gf_verbose", "gf_count"}));
  EXPECT_EQ(Given({"--nogf_verbose"}), std::set<std::string>{"gf_verbose"});
  EXPECT_EQ(Given({"--gf_verbose=false"}), std::set<std::string>{"gf_verbose"});
  // A bool flag does not take the next argument: "--gf_count" here is a flag.
  EXPECT_EQ(Given({"--gf_verbose", "--gf_count", "1"}),
            (std::set<std::string>{"gf_verbose", "gf_count"}));
  // "no" + a non-bool flag is not a negation.
  EXPECT_EQ(Given({"--nogf_count"}), std::set<std::string>{});
}

TEST(GivenFlagNamesTest, PositionalUnknownAndAfterDoubleDashAreSkipped) {
  EXPECT_EQ(Given({"up", "-", "--no_such_flag_here=1", "--", "--gf_count=1"}),
            std::set<std::string>{});
  EXPECT_EQ(Given({}), std::set<std::string>{});
}

// ScanArgs: where the positional arguments are, and unregistered flags kept
// (by name, without a flag) for the unknown-flag check.
TEST(ScanArgsTest, PositionalArgumentsAndUnknownFlags) {
  const std::vector<std::string> args = {"prog", "run", "--gf_name", "x", "--no_such=1",
                                         "-",    "--",  "--gf_count=1"};
  const ScannedArgs scanned = ScanArgs(args);
  EXPECT_EQ(scanned.positional, (std::vector<size_t>{1, 5, 7}));
  ASSERT_EQ(scanned.flags.size(), 2u);
  EXPECT_EQ(scanned.flags[0].index, 2u);
  EXPECT_EQ(scanned.flags[0].name, "gf_name");
  ASSERT_NE(scanned.flags[0].flag, nullptr);
  EXPECT_EQ(scanned.flags[0].flag->Name(), "gf_name");
  EXPECT_EQ(scanned.flags[1].index, 4u);
  EXPECT_EQ(scanned.flags[1].name, "no_such");
  EXPECT_EQ(scanned.flags[1].flag, nullptr);
}

TEST(ScanArgsTest, NegatedBoolKeepsTheWrittenName) {
  const ScannedArgs scanned = ScanArgs({"prog", "--nogf_verbose"});
  ASSERT_EQ(scanned.flags.size(), 1u);
  EXPECT_EQ(scanned.flags[0].name, "nogf_verbose");
  ASSERT_NE(scanned.flags[0].flag, nullptr);
  EXPECT_EQ(scanned.flags[0].flag->Name(), "gf_verbose");
}

}  // namespace
}  // namespace tandem
