#include "client/commands/chat_command.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "client/inference_client.h"
#include "client/json_request.h"
#include "tandem/client.h"

namespace tandem::client {
namespace {

// ModelInfo at start-up: a wrong address fails before anything is typed.
constexpr int32_t kModelInfoTimeoutS = 10;

void Message(const std::string& message) {
  std::fprintf(stderr, "tandem chat: %s\n", message.c_str());
}

// True when `status` means the coordinator itself is gone (not reachable,
// or the connection broke), as opposed to an UNAVAILABLE it answered over a
// live connection (e.g. its worker group is being reconnected), after which
// the next turn may well succeed.
bool ServerLost(const absl::Status& status, const tandem::Client& client) {
  return absl::IsUnavailable(status) && !client.IsConnected();
}

// Asks the coordinator at `o.addr` for its model at start-up, so that a wrong
// address fails before anything is typed. UNAVAILABLE (or the call's error)
// when it cannot be reached, FAILED_PRECONDITION when the model has no chat
// template; the message is the one to print.
absl::Status CheckChatModel(const ChatOptions& o) {
  const std::string& addr = o.addr;
  absl::StatusOr<tandem::ModelInfo> info =
      NewClient(addr, kModelInfoTimeoutS, o.tls_ca)->GetModelInfo();
  if (!info.ok()) {
    return absl::UnavailableError(absl::StrFormat("cannot reach the coordinator at %s: %s", addr,
                                                  DescribeStatus(info.status())));
  }
  if (!info->has_chat_template) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the model %s served at %s has no chat template", info->model_name, addr));
  }
  return absl::OkStatus();
}

// Writes streamed text to stdout as it arrives.
void WriteText(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// One turn: sends the system prompt and `history` (ending with the user's
// message), streams the answer to stdout and appends it to `history`. When
// the turn fails, the user's message leaves `history` too and the reason is
// printed. Returns false only when the coordinator itself is gone.
bool Turn(const ChatOptions& o, tandem::Client& client,
          std::vector<tokenizer::ChatMessage>& history) {
  JsonRequest request;
  request.params = o.params;
  if (o.system.has_value()) request.messages.push_back({"system", *o.system});
  request.messages.insert(request.messages.end(), history.begin(), history.end());
  bool printed = false;
  const StreamedGeneration g = StreamGenerate(
      client, SdkRequest(request), /*num_completions=*/1, [&](const std::string& text) {
        printed = true;
        WriteText(text);
      });
  // A turn that streamed something ends its line even when it failed.
  if (g.status.ok() || printed) WriteText("\n");
  if (!g.status.ok() || !g.error.empty()) {
    history.pop_back();  // the answer is lost, and so is the question
    if (ServerLost(g.status, client)) {
      Message(absl::StrFormat("lost the coordinator at %s: %s", o.addr,
                              DescribeStatus(g.status)));
      return false;
    }
    Message(absl::StrFormat("%s (this message is left out of the conversation)",
                            g.status.ok() ? "request failed: " + g.error
                                          : DescribeStatus(g.status)));
    return true;
  }
  const coordinator::Completion& answer = g.completions[0];
  if (answer.finish_reason == coordinator::FinishReason::kLength) {
    Message(absl::StrFormat("(the answer stopped at --max-tokens %d or the context length)",
                            o.params.max_tokens));
  }
  history.push_back({"assistant", answer.text});
  return true;
}

}  // namespace

int ChatCommand(const ChatOptions& o, std::istream& in, bool interactive) {
  if (o.addr.empty()) {
    Message("INVALID_ARGUMENT: --addr HOST:PORT is required");
    return 2;
  }
  if (o.params.n != 1) {
    Message(absl::StrFormat(
        "INVALID_ARGUMENT: --n %d: a chat turn has one answer, so --n must be 1", o.params.n));
    return 2;
  }
  if (absl::Status s = CheckChatModel(o); !s.ok()) {
    Message(std::string(s.message()));
    return 1;
  }
  // The conversation after the system prompt: user and assistant turns
  // alternate, a user turn last while its answer is being generated.
  std::vector<tokenizer::ChatMessage> history;
  std::unique_ptr<tandem::Client> client = NewClient(o.addr, o.timeout_s, o.tls_ca);
  while (true) {
    if (interactive) std::fputs("> ", stderr);
    std::string line;
    if (!std::getline(in, line)) {
      if (interactive) std::fputs("\n", stderr);
      return 0;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit") return 0;
    if (line == "/reset") {
      history.clear();
      Message("conversation cleared");
      continue;
    }
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    history.push_back({"user", line});
    if (!Turn(o, *client, history)) return 1;
  }
}

}  // namespace tandem::client
