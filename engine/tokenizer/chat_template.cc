#include "engine/tokenizer/chat_template.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tandem::tokenizer {
namespace {

constexpr absl::string_view kImStart = "<|im_start|>";
constexpr absl::string_view kImEnd = "<|im_end|>";
constexpr absl::string_view kSystemHeader = "<|im_start|>system\n";
constexpr size_t kMaxQuotedTemplate = 80;

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Create(std::string_view jinja_source) {
  const absl::string_view source(jinja_source.data(), jinja_source.size());
  if (source.find(kImStart) == absl::string_view::npos) {
    const bool cut = jinja_source.size() > kMaxQuotedTemplate;
    return absl::UnimplementedError(absl::StrCat(
        "chat template is not supported (only ChatML templates, which contain \"",
        kImStart, "\"); template (", jinja_source.size(), " chars): \"",
        absl::string_view(jinja_source.data(),
                          std::min(jinja_source.size(), kMaxQuotedTemplate)),
        cut ? "...\"" : "\""));
  }
  std::optional<std::string> system_prompt;
  // A literal system turn in the template is the default system message;
  // Jinja strings may also spell the newline as "\n".
  for (absl::string_view header : {kSystemHeader, absl::string_view("<|im_start|>system\\n")}) {
    const size_t start = source.find(header);
    if (start == absl::string_view::npos) continue;
    const size_t text_start = start + header.size();
    const size_t end = source.find(kImEnd, text_start);
    if (end == absl::string_view::npos) continue;
    const absl::string_view text = source.substr(text_start, end - text_start);
    // Template syntax inside means the system text is computed, not literal.
    if (text.find("{{") != absl::string_view::npos ||
        text.find("{%") != absl::string_view::npos ||
        text.find('\'') != absl::string_view::npos) {
      continue;
    }
    system_prompt = std::string(text);
    break;
  }
  return ChatTemplate(std::move(system_prompt));
}

absl::StatusOr<std::string> ChatTemplate::Apply(
    std::span<const ChatMessage> messages, bool add_generation_prompt,
    std::vector<Tokenizer::ByteRange>* content) const {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat(
          "chat message ", i, " has role \"", role,
          "\" (must be system, user or assistant)"));
    }
  }
  if (!messages.empty() && messages[0].role != "system" && default_system_prompt_) {
    absl::StrAppend(&out, kSystemHeader, *default_system_prompt_, kImEnd, "\n");
  }
  for (const ChatMessage& message : messages) {
    absl::StrAppend(&out, kImStart, message.role, "\n");
    if (content != nullptr) content->push_back({out.size(), out.size() + message.content.size()});
    absl::StrAppend(&out, message.content, kImEnd, "\n");
  }
  if (add_generation_prompt) absl::StrAppend(&out, kImStart, "assistant\n");
  return out;
}

absl::StatusOr<std::string> ApplyChatTemplate(std::span<const ChatMessage> messages,
                                              bool add_generation_prompt,
                                              std::string_view jinja_source,
                                              std::vector<Tokenizer::ByteRange>* content) {
  ASSIGN_OR_RETURN(const ChatTemplate chat_template, ChatTemplate::Create(jinja_source));
  return chat_template.Apply(messages, add_generation_prompt, content);
}

}  // namespace tandem::tokenizer
