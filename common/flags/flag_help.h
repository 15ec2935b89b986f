// The command line of every tandem binary: `--help` lists the flags a command
// takes, one line each with its default ("--kv-cache-bytes=536870912  KV
// cache capacity in bytes": the flag's value before parsing, which is the
// binary's own default where it set one, engine/options/engine_flags.h), and a flag the command does not take is refused
// by name ("unknown flag --foo; see tandem run --help", exit code 2) before
// Abseil parses any value. Abseil's own --help shows only flags defined in a
// file named after the binary and spends several lines on each; tandem's
// flags live in each binary's main.cc and in the engine-flags library
// (engine/options), so help and the flag check are done here, from Abseil's
// flag registry (names, help texts, defaults).
//
// Not thread-safe: run once from main() before other threads start.
#ifndef TANDEM_COMMON_FLAGS_FLAG_HELP_H_
#define TANDEM_COMMON_FLAGS_FLAG_HELP_H_

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace tandem {

// A flag a command takes, by Abseil name ("kv_cache_bytes"; help shows it
// dashed), and the text --help shows for it: the flag's own help unless
// `help` is given (for a flag that subcommands share with different
// meanings, such as `tandem`'s --out).
struct TakenFlag {
  // Implicit, so that a list of flags reads {{"model"}, {"out", "help"}}.
  TakenFlag(std::string flag_name, std::string flag_help = "")  // NOLINT
      : name(std::move(flag_name)), help(std::move(flag_help)) {}

  std::string name;
  std::string help;
};

// One command: a whole binary without subcommands (tandem-worker), or one
// subcommand (tandem run).
struct Command {
  std::string name;     // the subcommand ("run"); "" for a binary without any
  std::string usage;    // its arguments in one line: "--model PATH [flags]"
  std::string summary;  // what it does, one line
  std::vector<TakenFlag> flags;  // in the order --help lists them
};

// A binary: "tandem-worker" with one unnamed Command, or "tandem" with a
// Command per subcommand (named by the first positional argument).
struct Program {
  std::string name;
  std::vector<Command> commands;
};

// The flags defined in `file`, sorted by name: FlagsDefinedIn(__FILE__) in a
// main.cc is every flag that main.cc defines.
std::vector<TakenFlag> FlagsDefinedIn(absl::string_view file);
// The flags defined in any of `files`, sorted by name: a binary whose flags
// come from its main.cc and a flags library (engine/options/engine_flags.cc).
std::vector<TakenFlag> FlagsDefinedIn(std::initializer_list<absl::string_view> files);

// What a command line asks for, decided before any flag value is parsed.
struct CommandLineCheck {
  enum class Action {
    kRun,    // `command` runs
    kHelp,   // print `text` to stdout, exit 0
    kError,  // print `text` to stderr, exit 2
  };
  Action action = Action::kError;
  const Command* command = nullptr;  // kRun: the command chosen (in the program)
  std::string text;
};

// Checks `args` (argv[0] first, dashed flag names already turned into
// Abseil's: common/command_line.h). In order: --help, --helpfull, --helpshort
// or -h anywhere asks for help (of the subcommand named, else the list of
// subcommands; --helpfull: every subcommand's flags); a binary with
// subcommands needs a known one first among the positional arguments; every
// flag must be one the command takes (or Abseil's --flagfile, --fromenv,
// --tryfromenv, handed on to Abseil); no other positional argument is
// allowed. An error's text names the offending argument and the --help to
// read. A TakenFlag that is not registered is a programmer bug (CHECK).
CommandLineCheck CheckCommandLine(const Program& program, const std::vector<std::string>& args);

// The help of `command` of `program`: its usage line, its summary and its
// flags, one line each: "  --name=DEFAULT  help" (an empty default shows as
// ""). DEFAULT is the flag's current value, so call it before the command
// line is parsed (as CheckCommandLine and ParseCommandLineOrExit do): after,
// it would show the values given, secrets such as --api-key included.
std::string CommandHelp(const Program& program, const Command& command);

// The help of a binary with subcommands: its usage line and one line per
// subcommand (name and summary).
std::string SubcommandsHelp(const Program& program);

// The parsed command line of a binary.
struct ParsedCommandLine {
  const Command* command = nullptr;  // the command chosen (in the program)
  // The arguments with dashed flag names turned into Abseil's, argv[0]
  // first: what Abseil parsed (for GivenFlagNames).
  std::vector<std::string> args;
};

// CheckCommandLine on argv, then, for kRun, absl::ParseCommandLine (which
// sets every flag and exits 1 on a bad value, naming it). kHelp exits 0
// after printing the help to stdout; kError exits 2 after printing the
// message to stderr. `program` must outlive the returned command pointer.
ParsedCommandLine ParseCommandLineOrExit(const Program& program, int argc, char** argv);

}  // namespace tandem

#endif  // TANDEM_COMMON_FLAGS_FLAG_HELP_H_
