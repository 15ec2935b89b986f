// OpenAiRequest: the body of POST /v1/completions or /v1/chat/completions,
// parsed from JSON and checked for types, with vLLM's field names, defaults
// and extra fields (and tandem's: beam groups, speculation per request). The
// value ranges are checked where every request's are, by the scheduler
// (ValidateGenerateRequest); this parser only rejects what cannot become a
// request: malformed JSON, a field of the wrong type, an unknown field, a
// feature tandem does not implement asked for with a non-default value.
//
// Fields OpenAI defines that tandem accepts and ignores: user, store,
// metadata, service_tier, parallel_tool_calls. Accepted only at their
// defaults (else 400 naming them): best_of (= n), logit_bias (empty),
// suffix (empty), tools / functions (empty), tool_choice ("none" / "auto"),
// response_format ({"type": "text"}), include_stop_str_in_output (false).
//
// Thread-safety: a value; ParseOpenAiRequest is a pure function.
#ifndef TANDEM_COORDINATOR_HTTP_OPENAI_REQUEST_H_
#define TANDEM_COORDINATOR_HTTP_OPENAI_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/api/request.h"
#include "coordinator/http/json_fields.h"
#include "engine/tokenizer/chat_template.h"

namespace tandem::coordinator::http {

enum class ApiKind { kCompletion, kChat };

// A completion prompt as given: text, or token ids.
using PromptInput = std::variant<std::string, std::vector<int32_t>>;

struct OpenAiRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;  // empty when not given
  // kCompletion: one request per prompt (a list of prompts is a batch).
  std::vector<PromptInput> prompts;
  // kChat: the conversation, through the model's chat template.
  std::vector<tokenizer::ChatMessage> messages;
  bool add_generation_prompt = true;
  // Everything but the id and the prompt. params.max_tokens is unset
  // (max_tokens_given false) when the client left it to the server.
  GenerateRequest request;
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;
  // Logprobs to return: completions' `logprobs` (alternatives per position)
  // or chat's `top_logprobs` when `logprobs` is true; unset → none.
  std::optional<int32_t> logprobs;
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids
  bool skip_special_tokens = true;
};

// Parses `body` as a `kind` request. Every error names the field (its path)
// and what it must be ("'temperature' must be a number, got string"); the API
// answers it with 400.
std::variant<OpenAiRequest, FieldError> ParseOpenAiRequest(ApiKind kind, std::string_view body);

// Reads the "messages" field of `f` (a list of {role, content}; content a
// string or a list of text parts) into `out`; errors go to `f`.
void ReadChatMessages(JsonFields& f, std::vector<tokenizer::ChatMessage>* out);

}  // namespace tandem::coordinator::http

#endif  // TANDEM_COORDINATOR_HTTP_OPENAI_REQUEST_H_
