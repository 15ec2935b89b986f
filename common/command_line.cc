#include "common/command_line.h"

namespace tandem {

NormalizedArgs::NormalizedArgs(int argc, char** argv) {
  bool flags_done = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") flags_done = true;
    if (!flags_done && i > 0 && arg.size() > 2 && arg[0] == '-' && arg[1] == '-') {
      size_t end = arg.find('=');
      if (end == std::string::npos) end = arg.size();
      for (size_t k = 2; k < end; ++k) {
        if (arg[k] == '-') arg[k] = '_';
      }
    }
    args_.push_back(std::move(arg));
  }
  for (std::string& a : args_) pointers_.push_back(a.data());
}

}  // namespace tandem
