// Parsing of one JSONL request line (`tandem run --requests`): the prompt as
// text, chat messages or token ids, plus the sampling fields with the same
// names as vLLM's API. Unknown fields are rejected so typos do not pass
// silently.
#ifndef TANDEM_CLIENT_JSON_REQUEST_H_
#define TANDEM_CLIENT_JSON_REQUEST_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampling/sampling_params.h"
#include "engine/tokenizer/chat_template.h"

namespace tandem::client {

struct JsonRequest {
  std::optional<std::string> prompt;
  std::vector<tokenizer::ChatMessage> messages;
  std::optional<std::vector<int32_t>> prompt_token_ids;
  sampling::SamplingParams params;
  int32_t priority = 0;
};

// `defaults` supplies fields the line leaves out. Errors name the field.
absl::StatusOr<JsonRequest> ParseJsonRequest(const std::string& line,
                                             const sampling::SamplingParams& defaults);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_JSON_REQUEST_H_
