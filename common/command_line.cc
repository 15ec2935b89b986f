#include "common/command_line.h"

namespace tandem {

std::vector<std::string> NormalizeFlagNames(std::vector<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() > 2 && arg[0] == '-' && arg[1] == '-') {
      size_t end = arg.find('=');
      if (end == std::string::npos) end = arg.size();
      for (size_t k = 2; k < end; ++k) {
        if (arg[k] == '-') arg[k] = '_';
      }
    }
  }
  return args;
}

NormalizedArgs::NormalizedArgs(int argc, char** argv)
    : args_(NormalizeFlagNames(std::vector<std::string>(argv, argv + argc))) {
  for (std::string& a : args_) pointers_.push_back(a.data());
}

}  // namespace tandem
