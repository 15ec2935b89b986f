#include "common/flags/given_flags.h"

#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace {

// The registered flag "name" sets: itself, or for "noNAME" the bool flag NAME.
const absl::CommandLineFlag* FindGivenFlag(absl::string_view name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr && absl::StartsWith(name, "no")) {
    flag = absl::FindCommandLineFlag(name.substr(2));
    if (flag != nullptr && !flag->IsOfType<bool>()) flag = nullptr;
  }
  return flag;
}

}  // namespace

ScannedArgs ScanArgs(const std::vector<std::string>& args) {
  ScannedArgs scanned;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") {
      for (size_t k = i + 1; k < args.size(); ++k) scanned.positional.push_back(k);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {  // positional, "-" included
      scanned.positional.push_back(i);
      continue;
    }
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    const absl::CommandLineFlag* flag = FindGivenFlag(name);
    scanned.flags.push_back(GivenFlag{i, std::string(name), flag});
    // "--name value": the value is the next argument, whatever it looks like.
    if (flag != nullptr && eq == absl::string_view::npos && !flag->IsOfType<bool>()) ++i;
  }
  return scanned;
}

std::set<std::string> GivenFlagNames(const std::vector<std::string>& args) {
  std::set<std::string> names;
  for (const GivenFlag& given : ScanArgs(args).flags) {
    if (given.flag != nullptr) names.insert(std::string(given.flag->Name()));
  }
  return names;
}

}  // namespace tandem
