// NormalizedArgs: argv with the documented --dashed-flag spelling turned into
// Abseil's underscore names ("--kv-blocks=5" → "--kv_blocks=5"; values and
// everything after "--" untouched), kept alive for absl::ParseCommandLine.
// Shared by every binary's main.cc.
#ifndef TANDEM_COMMON_COMMAND_LINE_H_
#define TANDEM_COMMON_COMMAND_LINE_H_

#include <string>
#include <vector>

namespace tandem {

// `args` (argv[0] first) with every "--dashed-name" before "--" spelled as
// Abseil names it ("--dashed_name"); one result per argument, in order.
std::vector<std::string> NormalizeFlagNames(std::vector<std::string> args);

class NormalizedArgs {
 public:
  NormalizedArgs(int argc, char** argv);
  NormalizedArgs(const NormalizedArgs&) = delete;
  NormalizedArgs& operator=(const NormalizedArgs&) = delete;

  int argc() const { return static_cast<int>(pointers_.size()); }
  char** argv() { return pointers_.data(); }
  // The normalized arguments, argv[0] included.
  const std::vector<std::string>& args() const { return args_; }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_COMMAND_LINE_H_
