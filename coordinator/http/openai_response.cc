#include "coordinator/http/openai_response.h"

#include <algorithm>
#include <utility>

namespace tandem::coordinator::http {
namespace {

using nlohmann::json;

// The alternatives to report for `position`: the best `top_n` (they come
// best first), plus the chosen token when it is not among them.
std::vector<sampling::TokenLogprob> Alternatives(const PositionLogprobs& position, int32_t top_n) {
  std::vector<sampling::TokenLogprob> top(
      position.top.begin(),
      position.top.begin() + std::min<size_t>(position.top.size(), static_cast<size_t>(top_n)));
  const bool has_chosen = std::any_of(top.begin(), top.end(), [&](const auto& t) {
    return t.token == position.token;
  });
  if (!has_chosen && top_n > 0) top.push_back({position.token, position.logprob});
  return top;
}

// How logprobs name `token`: its text, or "token_id:N".
std::string TokenName(const ResponseHeader& header, const tokenizer::Tokenizer& tok,
                      int32_t token) {
  if (header.tokens_as_ids) return "token_id:" + std::to_string(token);
  return tok.TokenToPiece(token);
}

json Bytes(const std::string& piece) {
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

json ChatLogprobs(const ResponseHeader& header, const tokenizer::Tokenizer& tok,
                  std::span<const PositionLogprobs> positions, int32_t top_n) {
  json content = json::array();
  for (const PositionLogprobs& p : positions) {
    json top = json::array();
    for (const sampling::TokenLogprob& t : Alternatives(p, top_n)) {
      top.push_back({{"token", TokenName(header, tok, t.token)},
                     {"logprob", t.logprob},
                     {"bytes", Bytes(tok.TokenToPiece(t.token))}});
    }
    content.push_back({{"token", TokenName(header, tok, p.token)},
                       {"logprob", p.logprob},
                       {"bytes", Bytes(tok.TokenToPiece(p.token))},
                       {"top_logprobs", top}});
  }
  return json{{"content", std::move(content)}};
}

json CompletionLogprobs(const ResponseHeader& header, const tokenizer::Tokenizer& tok,
                        std::span<const PositionLogprobs> positions, int32_t top_n,
                        int64_t* text_offset) {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       offsets = json::array();
  for (const PositionLogprobs& p : positions) {
    const std::string& piece = tok.TokenToPiece(p.token);
    tokens.push_back(TokenName(header, tok, p.token));
    token_logprobs.push_back(p.logprob);
    json top = json::object();
    for (const sampling::TokenLogprob& t : Alternatives(p, top_n)) {
      top[TokenName(header, tok, t.token)] = t.logprob;
    }
    top_logprobs.push_back(std::move(top));
    offsets.push_back(*text_offset);
    *text_offset += static_cast<int64_t>(piece.size());
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(offsets)}};
}

}  // namespace

json FinishReasonJson(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return nullptr;
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
  }
  return nullptr;
}

json UsageJson(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json LogprobsJson(const ResponseHeader& header, const tokenizer::Tokenizer& tok,
                  std::span<const PositionLogprobs> positions, int64_t* text_offset) {
  if (!header.logprobs.has_value()) return nullptr;
  if (header.kind == ApiKind::kChat) return ChatLogprobs(header, tok, positions, *header.logprobs);
  return CompletionLogprobs(header, tok, positions, *header.logprobs, text_offset);
}

json EchoLogprobsJson(const ResponseHeader& header, const tokenizer::Tokenizer& tok,
                      std::span<const int32_t> prompt_tokens,
                      std::span<const PositionLogprobs> prompt_logprobs, int64_t* text_offset) {
  if (prompt_tokens.empty()) return CompletionLogprobs(header, tok, {}, 0, text_offset);
  const int32_t first = prompt_tokens[0];
  json head = {{"tokens", json::array({TokenName(header, tok, first)})},
               {"token_logprobs", json::array({nullptr})},
               {"top_logprobs", json::array({nullptr})},
               {"text_offset", json::array({*text_offset})}};
  *text_offset += static_cast<int64_t>(tok.TokenToPiece(first).size());
  AppendLogprobs(head, CompletionLogprobs(header, tok, prompt_logprobs,
                                          header.logprobs.value_or(0), text_offset));
  return head;
}

void AppendLogprobs(json& into, const json& more) {
  if (into.is_null()) {
    into = more;
    return;
  }
  if (more.is_null()) return;
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    for (const json& v : more[key]) into[key].push_back(v);
  }
}

json ResponseObject(const ResponseHeader& header, bool chunk, json choices) {
  const char* object = header.kind == ApiKind::kChat
                           ? (chunk ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  return {{"id", header.id},
          {"object", object},
          {"created", header.created},
          {"model", header.model},
          {"system_fingerprint", kSystemFingerprint},
          {"choices", std::move(choices)}};
}

json ChoiceJson(const ResponseHeader& header, int32_t index, const std::string& text,
                json logprobs, FinishReason reason) {
  json choice = {{"index", index},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", FinishReasonJson(reason)},
                 {"stop_reason", nullptr}};
  if (header.kind == ApiKind::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  return choice;
}

json ChunkChoiceJson(const ResponseHeader& header, int32_t index, const std::string& text,
                     bool role, json logprobs, FinishReason reason) {
  json choice = {{"index", index},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", FinishReasonJson(reason)}};
  if (header.kind == ApiKind::kChat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (!text.empty() || role) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  return choice;
}

std::string DumpJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string SseEvent(const json& value) { return "data: " + DumpJson(value) + "\n\n"; }

}  // namespace tandem::coordinator::http
