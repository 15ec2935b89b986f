// Renders a conversation into the prompt text a chat model was trained on.
#ifndef TANDEM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
#define TANDEM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace tandem::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// A chat template recognised from its Jinja source (GGUF
// tokenizer.chat_template). No Jinja interpreter: known template families are
// detected and rendered natively. Supported: ChatML ("<|im_start|>role\n" +
// content + "<|im_end|>\n" per message, "<|im_start|>assistant\n" as the
// generation prompt), with an optional default system message injected before
// the first message when that is not a system message (as SmolLM2-Instruct
// and Qwen2 templates do).
//
// Thread-safety: immutable after Create(); const methods may run concurrently.
class ChatTemplate {
 public:
  // Detects the family of `jinja_source`. ChatML is recognised by the text
  // "<|im_start|>"; the default system message is the text between
  // "<|im_start|>system\n" and the following "<|im_end|>" when the template
  // spells it out literally. Fails with Unimplemented quoting (the start of)
  // the template for anything else, including an empty one.
  static absl::StatusOr<ChatTemplate> Create(std::string_view jinja_source);

  // Renders `messages`, then the generation prompt when
  // `add_generation_prompt`. Fails with InvalidArgument naming the index and
  // role of a message whose role is not system / user / assistant. With
  // `content` (may be null), the byte range of each message's content in
  // the result is appended to it (the text whose control tokens are kept as
  // plain text: Tokenizer::Encode's `literal`).
  absl::StatusOr<std::string> Apply(std::span<const ChatMessage> messages,
                                    bool add_generation_prompt,
                                    std::vector<Tokenizer::ByteRange>* content = nullptr) const;

  // The injected system message, if the template has one.
  const std::optional<std::string>& default_system_prompt() const {
    return default_system_prompt_;
  }

 private:
  explicit ChatTemplate(std::optional<std::string> default_system_prompt)
      : default_system_prompt_(std::move(default_system_prompt)) {}

  std::optional<std::string> default_system_prompt_;
};

// ChatTemplate::Create(jinja_source) then Apply(messages, add_generation_prompt,
// content).
absl::StatusOr<std::string> ApplyChatTemplate(
    std::span<const ChatMessage> messages, bool add_generation_prompt,
    std::string_view jinja_source, std::vector<Tokenizer::ByteRange>* content = nullptr);

}  // namespace tandem::tokenizer

#endif  // TANDEM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
