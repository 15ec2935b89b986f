#include "common/flags/flag_help.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// Flags of this test binary only: the help reads names, help texts and
// defaults from Abseil's registry.
ABSL_FLAG(int32_t, fh_count, 2, "an int flag");
ABSL_FLAG(bool, fh_verbose, false, "a bool flag");
ABSL_FLAG(std::string, fh_name, "", "a string flag with an empty default");
ABSL_FLAG(std::string, fh_addr, "127.0.0.1:1", "an address");

namespace tandem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Action = CommandLineCheck::Action;

// "prog go" takes fh_count and fh_name; "prog ping" fh_addr and fh_verbose
// (the latter with help of its own).
Program TwoCommands() {
  return Program{"prog",
                 {{"go", "--fh-count N", "Goes somewhere", {{"fh_count"}, {"fh_name"}}},
                  {"ping", "--fh-addr HOST:PORT", "Pings a server",
                   {{"fh_addr"}, {"fh_verbose", "print every reply"}}}}};
}

Program Solo() { return Program{"solo", {{"", "[flags]", "Does one thing", FlagsDefinedIn(__FILE__)}}}; }

CommandLineCheck Check(const Program& program, std::vector<std::string> args) {
  args.insert(args.begin(), "/path/to/" + program.name);
  return CheckCommandLine(program, args);
}

TEST(FlagHelpTest, FlagsDefinedInAFileAreItsFlagsByName) {
  std::vector<std::string> names;
  for (const TakenFlag& f : FlagsDefinedIn(__FILE__)) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fh_addr", "fh_count", "fh_name", "fh_verbose"}));
}

// A build may pass relative or absolute source paths (so __FILE__ is either);
// Abseil strips a flag file's leading separators, and the match must too.
TEST(FlagHelpTest, FlagsDefinedInMatchesRelativeAndAbsolutePaths) {
  const std::string file = __FILE__;
  const size_t start = file.find_first_not_of('/');
  const std::string relative = file.substr(start);
  EXPECT_EQ(FlagsDefinedIn("/" + relative).size(), 4u);
  EXPECT_EQ(FlagsDefinedIn("//" + relative).size(), 4u);
  EXPECT_EQ(FlagsDefinedIn(relative).size(), 4u);
}

TEST(FlagHelpTest, CommandHelpListsEachFlagOnOneLineWithItsDefault) {
  const Program program = TwoCommands();
  const std::string go = CommandHelp(program, program.commands[0]);
  EXPECT_THAT(go, HasSubstr("usage: prog go --fh-count N\nGoes somewhere\n"));
  EXPECT_THAT(go, HasSubstr("\n  --fh-count=2  an int flag\n"));
  EXPECT_THAT(go, HasSubstr("\n  --fh-name=\"\"  a string flag with an empty default\n"));
  EXPECT_THAT(go, Not(HasSubstr("fh-addr")));
  const std::string ping = CommandHelp(program, program.commands[1]);
  EXPECT_THAT(ping, HasSubstr("\n  --fh-addr=127.0.0.1:1  an address\n"));
  EXPECT_THAT(ping, HasSubstr("\n  --fh-verbose=false     print every reply\n"));
}

TEST(FlagHelpTest, SubcommandsHelpListsEachCommandOnOneLine) {
  const std::string text = SubcommandsHelp(TwoCommands());
  EXPECT_THAT(text, HasSubstr("\n  go    Goes somewhere\n  ping  Pings a server\n"));
  EXPECT_THAT(text, Not(HasSubstr("fh-count")));
}

TEST(FlagHelpTest, HelpOfTheCommandNamedOrOfTheProgram) {
  const Program program = TwoCommands();
  for (const char* help : {"--help", "-help", "--helpshort", "-h"}) {
    CommandLineCheck c = Check(program, {"go", help});
    EXPECT_EQ(c.action, Action::kHelp) << help;
    EXPECT_EQ(c.text, CommandHelp(program, program.commands[0])) << help;
  }
  // Help wins over a bad flag; without a command it is the command list.
  EXPECT_EQ(Check(program, {"ping", "--no-such", "--help"}).text,
            CommandHelp(program, program.commands[1]));
  EXPECT_EQ(Check(program, {"--help"}).text, SubcommandsHelp(program));
  const CommandLineCheck full = Check(program, {"--helpfull"});
  EXPECT_EQ(full.action, Action::kHelp);
  EXPECT_THAT(full.text, HasSubstr("--fh-count=2"));
  EXPECT_THAT(full.text, HasSubstr("--fh-addr=127.0.0.1:1"));
}

TEST(FlagHelpTest, AFlagValueThatLooksLikeHelpIsAValue) {
  const Program program = TwoCommands();
  const CommandLineCheck c = Check(program, {"go", "--fh-name", "--help"});
  EXPECT_EQ(c.action, Action::kRun);
  ASSERT_NE(c.command, nullptr);
  EXPECT_EQ(c.command->name, "go");
}

TEST(FlagHelpTest, TheCommandsOwnFlagsRun) {
  const Program program = TwoCommands();
  const CommandLineCheck c = Check(program, {"--fh-addr=h:2", "ping", "--fh-addr", "h:1",
                                             "--nofh-verbose", "--flagfile=/dev/null"});
  EXPECT_EQ(c.action, Action::kRun) << c.text;
  ASSERT_NE(c.command, nullptr);
  EXPECT_EQ(c.command->name, "ping");
}

TEST(FlagHelpTest, AnUnknownFlagIsNamedAsWritten) {
  const Program program = TwoCommands();
  CommandLineCheck c = Check(program, {"go", "--no-such-flag=1"});
  EXPECT_EQ(c.action, Action::kError);
  EXPECT_EQ(c.text, "unknown flag --no-such-flag; see prog go --help\n");
  c = Check(program, {"go", "-version"});
  EXPECT_EQ(c.text, "unknown flag -version; see prog go --help\n");
}

TEST(FlagHelpTest, AFlagOfAnotherCommandNamesThatCommand) {
  const CommandLineCheck c = Check(TwoCommands(), {"go", "--fh-addr", "h:1"});
  EXPECT_EQ(c.action, Action::kError);
  EXPECT_EQ(c.text, "unknown flag --fh-addr; see prog go --help (it is a flag of prog ping)\n");
}

TEST(FlagHelpTest, MissingUnknownAndExtraCommands) {
  const Program program = TwoCommands();
  CommandLineCheck c = Check(program, {});
  EXPECT_EQ(c.action, Action::kError);
  EXPECT_THAT(c.text, HasSubstr("no command given"));
  EXPECT_THAT(c.text, HasSubstr(SubcommandsHelp(program)));
  c = Check(program, {"gone", "--fh-count=1"});
  EXPECT_EQ(c.text, "unknown command 'gone'; see prog --help\n");
  c = Check(program, {"go", "ping"});
  EXPECT_EQ(c.text, "unexpected argument 'ping'; see prog go --help\n");
}

TEST(FlagHelpTest, ABinaryWithoutSubcommands) {
  const Program program = Solo();
  CommandLineCheck c = Check(program, {"--fh-count=1", "--fh-addr=x"});
  EXPECT_EQ(c.action, Action::kRun) << c.text;
  c = Check(program, {"--help"});
  EXPECT_EQ(c.action, Action::kHelp);
  EXPECT_THAT(c.text, HasSubstr("usage: solo [flags]\n"));
  for (const char* flag : {"--fh-addr=", "--fh-count=", "--fh-name=", "--fh-verbose="}) {
    EXPECT_THAT(c.text, HasSubstr(flag));
  }
  EXPECT_EQ(Check(program, {"--helpfull"}).text, c.text);
  EXPECT_EQ(Check(program, {"x"}).text, "unexpected argument 'x'; see solo --help\n");
  EXPECT_EQ(Check(program, {"--fh-nam=1"}).text, "unknown flag --fh-nam; see solo --help\n");
}

TEST(FlagHelpDeathTest, AListedFlagThatIsNotDefinedIsAProgrammerBug) {
  const Program program{"prog", {{"go", "", "", {{"fh_no_such_flag"}}}}};
  EXPECT_DEATH(Check(program, {"go"}), "fh_no_such_flag");
}

}  // namespace
}  // namespace tandem
