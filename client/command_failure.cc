#include "client/command_failure.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::client {

int CommandFailed(std::string_view command, std::string_view message) {
  std::fprintf(stderr, "tandem %.*s: %.*s\n", static_cast<int>(command.size()), command.data(),
               static_cast<int>(message.size()), message.data());
  return 1;
}

int CommandFailed(std::string_view command, const absl::Status& status) {
  const std::string text =
      absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
  return CommandFailed(command, text);
}

}  // namespace tandem::client
