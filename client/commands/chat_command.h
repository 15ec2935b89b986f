// `tandem chat`: an interactive multi-turn conversation with a
// tandem-coordinator. Each line read from stdin is one user message; the
// whole conversation so far (the optional system prompt, then the user and
// assistant turns) goes to Inference.GenerateStream as chat messages, the
// answer is printed to stdout as it streams (then a newline) and becomes the
// next assistant turn. "/reset" forgets the conversation (the system prompt
// stays); "/exit" or end of input ends the session. A "> " prompt goes to
// stderr when stdin is a terminal.
#ifndef TANDEM_CLIENT_COMMANDS_CHAT_COMMAND_H_
#define TANDEM_CLIENT_COMMANDS_CHAT_COMMAND_H_

#include <cstdint>
#include <istream>
#include <optional>
#include <string>

#include "engine/sampling/sampling_params.h"

namespace tandem::client {

struct ChatOptions {
  std::string addr = "127.0.0.1:50051";  // the coordinator, HOST:PORT
  std::string tls_ca;                    // TLS trusting this PEM CA file; "" = plaintext
  std::optional<std::string> system;     // the system prompt, first in every request
  sampling::SamplingParams params;       // for every turn; n must be 1
  int32_t timeout_s = 0;                 // per-turn gRPC deadline; 0 = none
};

// Runs the session over `in`. Returns the process exit code: 0 when the
// input ends or says /exit; 1 when the server cannot be reached or is lost
// (the reason on stderr); 2 for invalid options. A turn the server rejects
// (e.g. the conversation no longer fits the context) prints the server's
// message to stderr and is dropped from the conversation; the session goes on.
int ChatCommand(const ChatOptions& options, std::istream& in, bool interactive);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_COMMANDS_CHAT_COMMAND_H_
