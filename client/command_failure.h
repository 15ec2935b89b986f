// CommandFailed: how a `tandem` subcommand reports the error that ends it.
// One line on stderr, "tandem COMMAND: CODE: message" for a status, so
// every subcommand's failures read alike and scripts can match them.
#ifndef TANDEM_CLIENT_COMMAND_FAILURE_H_
#define TANDEM_CLIENT_COMMAND_FAILURE_H_

#include <string_view>

#include "absl/status/status.h"

namespace tandem::client {

// Prints "tandem `command`: `message`"; returns the exit code (1).
int CommandFailed(std::string_view command, std::string_view message);
// Prints "tandem `command`: CODE: message" for a non-OK `status`; 1.
int CommandFailed(std::string_view command, const absl::Status& status);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMAND_FAILURE_H_
