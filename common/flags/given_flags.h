// Reading a command line with absl::ParseCommandLine's grammar before (or
// beside) Abseil, for the facts Abseil keeps private: which flags the command
// line names, whether each is registered, and where the positional arguments
// are. Two uses: every main.cc's help and unknown-flag check
// (common/flags/flag_help.h), and telling "--tp 2" (the default, given on purpose)
// from no --tp at all, which comparing a flag with its default cannot
// (`tandem up --config`: a config file loses to the first and wins over the
// second).
#ifndef TANDEM_COMMON_FLAGS_GIVEN_FLAGS_H_
#define TANDEM_COMMON_FLAGS_GIVEN_FLAGS_H_

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"

namespace tandem {

// One flag argument of a command line.
struct GivenFlag {
  size_t index = 0;  // its position in the arguments (argv[0] is 0)
  // As written, without the leading dashes and "=value": "kv_blocks",
  // "noprefix_cache", "no_such_flag".
  std::string name;
  // The registered flag it sets ("noNAME" sets the bool flag NAME); nullptr
  // when no flag is registered under `name`.
  const absl::CommandLineFlag* flag = nullptr;
};

// A command line split into flags and positional arguments.
struct ScannedArgs {
  std::vector<GivenFlag> flags;
  std::vector<size_t> positional;  // indices, those after "--" included
};

// Reads `args` with absl::ParseCommandLine's grammar: argv[0] first; "-name"
// or "--name"; "name=value" or, for a registered non-bool flag, "name" with
// the value in the next argument (whatever it looks like); "noname" for a
// bool flag; positional arguments ("-" included) anywhere; everything after
// "--" positional. An unregistered flag is taken to carry no separate value.
// Flags read from a --flagfile are not seen.
ScannedArgs ScanArgs(const std::vector<std::string>& args);

// The names (as Abseil spells them: "grace_s", "no_draft") of the registered
// flags that `args` sets (ScanArgs' grammar). Unregistered names are skipped.
std::set<std::string> GivenFlagNames(const std::vector<std::string>& args);

}  // namespace tandem

#endif  // TANDEM_COMMON_FLAGS_GIVEN_FLAGS_H_
