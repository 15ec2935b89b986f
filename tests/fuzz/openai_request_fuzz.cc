// libFuzzer target for the OpenAI HTTP request parser: any body must either
// be rejected with a FieldError whose message names the field (a non-empty
// message and, for a bad field, its path), or parse into a request whose
// prompts and messages are usable. The first byte picks completions or chat.
// Built by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "coordinator/http/openai_request.h"

namespace {

using tandem::coordinator::http::ApiKind;
using tandem::coordinator::http::FieldError;
using tandem::coordinator::http::OpenAiRequest;
using tandem::coordinator::http::ParseOpenAiRequest;
using tandem::coordinator::http::PromptInput;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "openai_request_fuzz invariant broken: %s\n", what);
  std::abort();
}

// Reads every part of a parsed request, so the sanitizers see any dangling
// or uninitialized data in it.
void Touch(const OpenAiRequest& r) {
  size_t sum = r.model.size() + r.messages.size();
  for (const PromptInput& p : r.prompts) {
    if (const auto* text = std::get_if<std::string>(&p)) {
      sum += text->size();
    } else {
      for (int32_t id : std::get<std::vector<int32_t>>(p)) sum += static_cast<size_t>(id);
    }
  }
  for (const auto& m : r.messages) sum += m.role.size() + m.content.size();
  for (const auto& s : r.request.params.stop) sum += s.size();
  if (sum == 1u << 31) std::fputc(' ', stderr);  // keeps the reads
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ApiKind kind = (data[0] & 1) != 0 ? ApiKind::kChat : ApiKind::kCompletion;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::variant<OpenAiRequest, FieldError> parsed = ParseOpenAiRequest(kind, body);
  if (const FieldError* e = std::get_if<FieldError>(&parsed)) {
    if (e->message.empty()) Fail("an error without a message");
    return 0;
  }
  const OpenAiRequest& r = std::get<OpenAiRequest>(parsed);
  if (kind == ApiKind::kCompletion && r.prompts.empty()) Fail("a completion without a prompt");
  if (kind == ApiKind::kChat && r.messages.empty()) Fail("a chat without messages");
  Touch(r);
  return 0;
}
