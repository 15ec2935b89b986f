#include "client/given_flags.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace tandem::client {

std::set<std::string> GivenFlagNames(const std::vector<std::string>& args) {
  std::set<std::string> names;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // positional, "-" included
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag != nullptr && !flag->IsOfType<bool>()) flag = nullptr;
    }
    if (flag == nullptr) continue;
    names.insert(std::string(flag->Name()));
    // "--name value": the value is the next argument, whatever it looks like.
    if (eq == absl::string_view::npos && !flag->IsOfType<bool>()) ++i;
  }
  return names;
}

}  // namespace tandem::client
