#include "common/flags/flag_help.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/command_line.h"
#include "common/flags/given_flags.h"
#include "common/logging.h"

namespace tandem {
namespace {

// Abseil's own flags that are handed on to it: flags from a file or from
// FLAGS_name environment variables.
constexpr absl::string_view kAbseilFlags[] = {"flagfile", "fromenv", "tryfromenv"};
constexpr char kAbseilFlagsLine[] =
    "Abseil's --flagfile=FILE (flags from FILE) and --fromenv=NAME,... (from FLAGS_NAME "
    "variables) work as well.\n";

// Help column: the "--name=default" part is padded to this width (or to the
// longest one, if shorter) so that the help texts line up.
constexpr size_t kMaxFlagColumn = 34;

bool HasSubcommands(const Program& program) {
  return !(program.commands.size() == 1 && program.commands[0].name.empty());
}

// "tandem run", or "tandem-worker" for a binary without subcommands.
std::string FullName(const Program& program, const Command& command) {
  return command.name.empty() ? program.name : absl::StrCat(program.name, " ", command.name);
}

bool IsHelpFlag(const GivenFlag& given) {
  return given.name == "help" || given.name == "helpfull" || given.name == "helpshort" ||
         (given.name == "h" && given.flag == nullptr);
}

bool Takes(const Command& command, absl::string_view name) {
  return std::any_of(command.flags.begin(), command.flags.end(),
                     [&](const TakenFlag& f) { return f.name == name; });
}

const absl::CommandLineFlag& Registered(const TakenFlag& taken) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(taken.name);
  CHECK(flag != nullptr, "flag '%s' is listed for a command but not defined", taken.name);
  return *flag;
}

// "--kv-cache-bytes=536870912": the name as documented (dashed) and the default.
// The flag's value before the command line is parsed: its default, or the
// binary's own default set before parsing (engine/options/engine_flags.h).
std::string FlagWithDefault(const absl::CommandLineFlag& flag) {
  std::string value = flag.CurrentValue();
  if (value.empty()) value = "\"\"";
  return absl::StrCat("--", absl::StrReplaceAll(flag.Name(), {{"_", "-"}}), "=", value);
}

const Command* FindCommand(const Program& program, absl::string_view name) {
  for (const Command& command : program.commands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

// The message for a flag `command` does not take: as written, and who takes it.
std::string UnknownFlagMessage(const Program& program, const Command& command,
                               const GivenFlag& given, absl::string_view written) {
  std::string text = absl::StrCat("unknown flag ", written.substr(0, written.find('=')),
                                   "; see ", FullName(program, command), " --help");
  if (given.flag == nullptr) return text;
  std::vector<std::string> takers;
  for (const Command& other : program.commands) {
    if (Takes(other, given.flag->Name())) takers.push_back(FullName(program, other));
  }
  if (!takers.empty()) {
    absl::StrAppend(&text, " (it is a flag of ", absl::StrJoin(takers, ", "), ")");
  }
  return text;
}

CommandLineCheck Help(std::string text) {
  return CommandLineCheck{CommandLineCheck::Action::kHelp, nullptr, std::move(text)};
}

// `text` is one line, or (ending in a newline) several.
CommandLineCheck Error(std::string text) {
  if (!absl::EndsWith(text, "\n")) text += "\n";
  return CommandLineCheck{CommandLineCheck::Action::kError, nullptr, std::move(text)};
}

// --helpfull of a binary with subcommands: the list, then every command's help.
std::string FullHelp(const Program& program) {
  std::string text = SubcommandsHelp(program);
  for (const Command& command : program.commands) {
    absl::StrAppend(&text, "\n", CommandHelp(program, command));
  }
  return text;
}

// The command to run: a binary's only one, or the subcommand that the first
// positional argument names; else the error to report.
CommandLineCheck ChooseCommand(const Program& program, const std::vector<std::string>& args,
                               const ScannedArgs& scanned) {
  if (!HasSubcommands(program)) {
    return CommandLineCheck{CommandLineCheck::Action::kRun, &program.commands[0], ""};
  }
  if (scanned.positional.empty()) {
    return Error(absl::StrCat("no command given\n\n", SubcommandsHelp(program)));
  }
  const std::string& name = args[scanned.positional[0]];
  const Command* command = FindCommand(program, name);
  if (command == nullptr) {
    return Error(absl::StrCat("unknown command '", name, "'; see ", program.name, " --help"));
  }
  return CommandLineCheck{CommandLineCheck::Action::kRun, command, ""};
}

// The help a help flag anywhere asks for: of the command named (or of the
// only one), else the list of subcommands; --helpfull: every command's.
std::optional<CommandLineCheck> HelpAsked(const Program& program,
                                          const std::vector<std::string>& args,
                                          const ScannedArgs& scanned) {
  for (const GivenFlag& given : scanned.flags) {
    if (!IsHelpFlag(given)) continue;
    if (given.name == "helpfull" && HasSubcommands(program)) return Help(FullHelp(program));
    const Command* command = HasSubcommands(program) ? nullptr : &program.commands[0];
    if (command == nullptr && !scanned.positional.empty()) {
      command = FindCommand(program, args[scanned.positional[0]]);
    }
    return Help(command != nullptr ? CommandHelp(program, *command) : SubcommandsHelp(program));
  }
  return std::nullopt;
}

}  // namespace

std::vector<TakenFlag> FlagsDefinedIn(absl::string_view file) {
  // Abseil reports a flag's file with its leading path separators removed
  // (its default normalize_filename), so an absolute __FILE__ — a build
  // that passes absolute source paths — must be compared the same way.
  auto normalized = [](absl::string_view path) {
    const size_t start = path.find_first_not_of("/\\");
    return start == absl::string_view::npos ? absl::string_view() : path.substr(start);
  };
  std::vector<TakenFlag> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (normalized(flag->Filename()) == normalized(file)) {
      flags.push_back(TakenFlag{std::string(name), ""});
    }
  }
  std::sort(flags.begin(), flags.end(),
            [](const TakenFlag& a, const TakenFlag& b) { return a.name < b.name; });
  return flags;
}

std::vector<TakenFlag> FlagsDefinedIn(std::initializer_list<absl::string_view> files) {
  std::vector<TakenFlag> flags;
  for (absl::string_view file : files) {
    std::vector<TakenFlag> defined = FlagsDefinedIn(file);
    flags.insert(flags.end(), defined.begin(), defined.end());
  }
  std::sort(flags.begin(), flags.end(),
            [](const TakenFlag& a, const TakenFlag& b) { return a.name < b.name; });
  return flags;
}

std::string CommandHelp(const Program& program, const Command& command) {
  std::string text = absl::StrCat("usage: ", FullName(program, command), " ", command.usage,
                                  "\n", command.summary, "\n\nflags:\n");
  std::vector<std::string> heads;
  size_t column = 0;
  for (const TakenFlag& taken : command.flags) {
    heads.push_back(FlagWithDefault(Registered(taken)));
    column = std::max(column, std::min(heads.back().size(), kMaxFlagColumn));
  }
  for (size_t i = 0; i < command.flags.size(); ++i) {
    const TakenFlag& taken = command.flags[i];
    const std::string help = taken.help.empty() ? Registered(taken).Help() : taken.help;
    const size_t pad = heads[i].size() < column ? column - heads[i].size() : 0;
    absl::StrAppend(&text, "  ", heads[i], std::string(pad + 2, ' '), help, "\n");
  }
  absl::StrAppend(&text, kAbseilFlagsLine);
  return text;
}

std::string SubcommandsHelp(const Program& program) {
  std::string text = absl::StrCat("usage: ", program.name, " COMMAND [flags]   (", program.name,
                                  " COMMAND --help lists its flags)\n\ncommands:\n");
  size_t column = 0;
  for (const Command& command : program.commands) column = std::max(column, command.name.size());
  for (const Command& command : program.commands) {
    absl::StrAppend(&text, "  ", command.name, std::string(column - command.name.size() + 2, ' '),
                    command.summary, "\n");
  }
  return text;
}

CommandLineCheck CheckCommandLine(const Program& program, const std::vector<std::string>& args) {
  // Every listed flag must exist, whatever this command line asks for, so a
  // misspelt table fails on any run, not only on that command's --help.
  for (const Command& command : program.commands) {
    for (const TakenFlag& taken : command.flags) Registered(taken);
  }
  const std::vector<std::string> normalized = NormalizeFlagNames(args);
  const ScannedArgs scanned = ScanArgs(normalized);
  if (std::optional<CommandLineCheck> help = HelpAsked(program, normalized, scanned)) {
    return *std::move(help);
  }
  CommandLineCheck check = ChooseCommand(program, normalized, scanned);
  if (check.action != CommandLineCheck::Action::kRun) return check;
  const Command& command = *check.command;
  for (const GivenFlag& given : scanned.flags) {
    const bool abseil = given.flag != nullptr &&
                        std::find(std::begin(kAbseilFlags), std::end(kAbseilFlags),
                                  given.flag->Name()) != std::end(kAbseilFlags);
    if (given.flag != nullptr && (abseil || Takes(command, given.flag->Name()))) continue;
    return Error(UnknownFlagMessage(program, command, given, args[given.index]));
  }
  const size_t first_extra = HasSubcommands(program) ? 1 : 0;
  if (scanned.positional.size() > first_extra) {
    return Error(absl::StrCat("unexpected argument '", args[scanned.positional[first_extra]],
                              "'; see ", FullName(program, command), " --help"));
  }
  return check;
}

ParsedCommandLine ParseCommandLineOrExit(const Program& program, int argc, char** argv) {
  const CommandLineCheck check =
      CheckCommandLine(program, std::vector<std::string>(argv, argv + argc));
  switch (check.action) {
    case CommandLineCheck::Action::kHelp:
      std::fputs(check.text.c_str(), stdout);
      std::exit(0);
    case CommandLineCheck::Action::kError:
      std::fputs(check.text.c_str(), stderr);
      std::exit(2);
    case CommandLineCheck::Action::kRun:
      break;
  }
  // Abseil's usage message, for its own messages (a bad flag value).
  absl::SetProgramUsageMessage(
      absl::StrCat(FullName(program, *check.command), " ", check.command->usage));
  NormalizedArgs normalized(argc, argv);
  absl::ParseCommandLine(normalized.argc(), normalized.argv());
  return ParsedCommandLine{check.command, normalized.args()};
}

}  // namespace tandem
