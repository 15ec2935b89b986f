// The output shapes `tandem run` and `tandem generate` share, so both print
// exactly the same thing for the same results.
#ifndef TANDEM_CLIENT_RESULT_JSON_H_
#define TANDEM_CLIENT_RESULT_JSON_H_

#include <cstdint>
#include <span>
#include <string>

#include "coordinator/api/request.h"
#include "nlohmann/json.hpp"

namespace tandem::client {

// One returned sequence: prompt_token_ids, token_ids, text, finish_reason,
// with `top_logprobs` > 0 also top_logprobs and logprobs per position,
// prefix_hit_tokens when the prompt hit the prefix cache, and
// prompt_logprobs when the request asked for them: null for the first
// prompt token, then {"token_id", "logprob", "top_logprobs": [{"token_id",
// "logprob"}...]} for each later one.
nlohmann::json CompletionJson(std::span<const int32_t> prompt_token_ids,
                              const coordinator::Completion& completion, int32_t top_logprobs,
                              int64_t prefix_hit_tokens,
                              std::span<const coordinator::PositionLogprobs> prompt_logprobs = {});

// One `--requests` answer line: the CompletionJson of the only sequence when
// n = 1, else {"prompt_token_ids", "prompt_logprobs", "sequences": [...]};
// "error" when set.
nlohmann::json RequestLineJson(std::span<const int32_t> prompt_token_ids,
                               std::span<const coordinator::Completion> completions,
                               int32_t top_logprobs, int64_t prefix_hit_tokens,
                               const std::string& error,
                               std::span<const coordinator::PositionLogprobs> prompt_logprobs = {});

// Plain-text output of completions that were not streamed (n > 1).
void PrintCompletionsText(std::span<const coordinator::Completion> completions);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_RESULT_JSON_H_
