// The JSON of the OpenAI-compatible responses, with vLLM's shapes: completion
// and chat completion objects, their streaming chunks (server-sent events),
// usage, and logprobs in the legacy completions shape (tokens,
// token_logprobs, top_logprobs, text_offset) or the chat shape (content:
// [{token, logprob, bytes, top_logprobs}]). Pure functions of their inputs.
#ifndef TANDEM_COORDINATOR_HTTP_OPENAI_RESPONSE_H_
#define TANDEM_COORDINATOR_HTTP_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "coordinator/api/request.h"
#include "coordinator/http/openai_request.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "nlohmann/json.hpp"

namespace tandem::coordinator::http {

// What every response and chunk of one call carries.
struct ResponseHeader {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  // Alternatives per position when the request asked for logprobs.
  std::optional<int32_t> logprobs;
  // vLLM's return_tokens_as_token_ids: logprobs name tokens "token_id:N".
  bool tokens_as_ids = false;
};

// The fingerprint responses carry: the server build.
inline constexpr char kSystemFingerprint[] = "fp_tandem";

// The `finish_reason` of `reason`: "stop", "length", "abort" (cancelled) or
// "error"; null while running.
nlohmann::json FinishReasonJson(FinishReason reason);

// `usage` for `prompt_tokens` and `completion_tokens`.
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);

// Completions with echo and logprobs: the prompt's tokens in the legacy
// logprobs shape — the first token's logprob and alternatives null (nothing
// precedes it), then `prompt_logprobs` (one per later token) as
// LogprobsJson shows generated ones. Text offsets start at `*text_offset`.
nlohmann::json EchoLogprobsJson(const ResponseHeader& header, const tokenizer::Tokenizer& tok,
                                std::span<const int32_t> prompt_tokens,
                                std::span<const PositionLogprobs> prompt_logprobs,
                                int64_t* text_offset);

// Appends the legacy logprobs arrays of `more` to those of `into` (null
// `into` becomes `more`).
void AppendLogprobs(nlohmann::json& into, const nlohmann::json& more);

// The logprobs of `positions` in `header.kind`'s shape, keeping the
// `*header.logprobs` best alternatives per position (plus the chosen token
// when it is not among them, as vLLM does). Completions: text offsets start
// at `*text_offset`, which advances past the positions' text.
nlohmann::json LogprobsJson(const ResponseHeader& header, const tokenizer::Tokenizer& tok,
                            std::span<const PositionLogprobs> positions, int64_t* text_offset);

// An object with the header's fields: id, object, created, model,
// system_fingerprint, and `choices`.
nlohmann::json ResponseObject(const ResponseHeader& header, bool chunk, nlohmann::json choices);

// One choice of a complete response: text (completions) or an assistant
// message (chat), logprobs (null unless asked) and finish reason.
nlohmann::json ChoiceJson(const ResponseHeader& header, int32_t index, const std::string& text,
                          nlohmann::json logprobs, FinishReason reason);

// One choice of a streaming chunk: new `text` (a chat delta's content; with
// `role` the assistant role too), logprobs and finish reason (null while
// running).
nlohmann::json ChunkChoiceJson(const ResponseHeader& header, int32_t index,
                               const std::string& text, bool role, nlohmann::json logprobs,
                               FinishReason reason);

// `value` as one server-sent event: "data: JSON\n\n" (invalid UTF-8 in
// strings replaced with U+FFFD).
std::string SseEvent(const nlohmann::json& value);
// The event that ends every stream.
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// `value` serialized with invalid UTF-8 replaced.
std::string DumpJson(const nlohmann::json& value);

}  // namespace tandem::coordinator::http

#endif  // TANDEM_COORDINATOR_HTTP_OPENAI_RESPONSE_H_
