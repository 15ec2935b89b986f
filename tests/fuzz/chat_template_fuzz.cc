// libFuzzer target for the chat template (engine/tokenizer/chat_template.h)
// on arbitrary messages, as the coordinator renders a chat prompt
// (RequestAdmission::EncodeChat): the default model's template, then the
// tokenizer with special-token parsing.
//
// Input: a flags byte, then records separated by 0x1E; each record is
// role 0x1F content (no 0x1F: the whole record is the role, the content is
// empty). Roles and contents are any bytes, invalid UTF-8 included.
// Flags: bit 0 add_generation_prompt; bit 1 the first record is the Jinja
// source of the template instead of a message (ApplyChatTemplate);
// bit 2 encode the rendered prompt and decode it back.
//
// Invariants: Apply fails (InvalidArgument, non-empty message) exactly when
// some role is not system / user / assistant; a rendered prompt holds every
// message's role and content in order and ends with the generation prompt
// when asked; Create fails (Unimplemented) exactly when the source has no
// "<|im_start|>"; the rendered prompt encodes and decodes back to itself.
// The model is $TANDEM_MODEL (run_fuzz.sh sets it), else the default model
// under models/. Built by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/vocab.h"
#include "tests/fuzz/fuzz_vocab.h"

namespace {

using tandem::tokenizer::ChatMessage;
using tandem::tokenizer::ChatTemplate;
using tandem::tokenizer::Tokenizer;

const Tokenizer* g_tokenizer = nullptr;
const ChatTemplate* g_template = nullptr;  // the model's

constexpr char kRecordSeparator = '\x1e';
constexpr char kRoleSeparator = '\x1f';
constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kGenerationPrompt = "<|im_start|>assistant\n";

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "chat_template_fuzz invariant broken: %s\n", what);
  std::abort();
}

[[noreturn]] void Die(const char* what, const absl::Status& status) {
  tandem::fuzz::Die("chat_template_fuzz", what, status);
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

bool KnownRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant";
}

// Every message's "role\ncontent" appears in `prompt`, in order.
void CheckRendered(const std::string& prompt, const std::vector<ChatMessage>& messages,
                   bool add_generation_prompt) {
  size_t at = 0;
  for (const ChatMessage& m : messages) {
    const std::string turn = std::string(kImStart) + m.role + "\n" + m.content;
    const size_t found = prompt.find(turn, at);
    if (found == std::string::npos) Fail("a message missing from the rendered prompt");
    at = found + turn.size();
  }
  if (add_generation_prompt &&
      (prompt.size() < kGenerationPrompt.size() ||
       prompt.compare(prompt.size() - kGenerationPrompt.size(), kGenerationPrompt.size(),
                      kGenerationPrompt) != 0)) {
    Fail("the rendered prompt does not end with the generation prompt");
  }
}

void CheckEncodes(const std::string& prompt) {
  const std::vector<int32_t> ids = g_tokenizer->Encode(prompt, /*add_special=*/false, true);
  absl::StatusOr<std::string> decoded = g_tokenizer->Decode(ids, /*skip_special=*/false);
  if (!decoded.ok()) Fail("Decode failed on the rendered prompt's ids");
  // Decode returns the input when every byte has a token (bpe_tokenizer.h);
  // tokenizer_fuzz checks that exactly, here only the template's own tokens.
  if (decoded->find(kImStart) == std::string::npos) Fail("<|im_start|> lost in encoding");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tandem::tokenizer::Vocab vocab = tandem::fuzz::LoadFuzzVocab("chat_template_fuzz");
  auto chat_template = ChatTemplate::Create(vocab.chat_template);
  if (!chat_template.ok()) Die("the model's chat template", chat_template.status());
  g_template = new ChatTemplate(*std::move(chat_template));  // lives as long as the process
  auto tokenizer = Tokenizer::Create(std::move(vocab));
  if (!tokenizer.ok()) Die("creating the tokenizer", tokenizer.status());
  g_tokenizer = tokenizer->release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool add_generation_prompt = (data[0] & 1) != 0;
  const bool own_template = (data[0] & 2) != 0;
  const bool encode = (data[0] & 4) != 0;
  std::vector<std::string_view> records =
      Split(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), kRecordSeparator);
  std::optional<std::string_view> source;
  if (own_template) {
    source = records.front();
    records.erase(records.begin());
  }
  std::vector<ChatMessage> messages;
  bool roles_known = true;
  for (std::string_view record : records) {
    const size_t cut = record.find(kRoleSeparator);
    ChatMessage m;
    m.role = std::string(record.substr(0, cut));
    if (cut != std::string_view::npos) m.content = std::string(record.substr(cut + 1));
    roles_known = roles_known && KnownRole(m.role);
    messages.push_back(std::move(m));
  }

  absl::StatusOr<std::string> prompt;
  if (source) {
    prompt = tandem::tokenizer::ApplyChatTemplate(messages, add_generation_prompt, *source);
    const bool chat_ml = source->find(kImStart) != std::string_view::npos;
    if (!chat_ml) {
      if (prompt.ok() || prompt.status().code() != absl::StatusCode::kUnimplemented ||
          prompt.status().message().empty()) {
        Fail("a template without <|im_start|> not rejected as Unimplemented with a message");
      }
      return 0;
    }
  } else {
    prompt = g_template->Apply(messages, add_generation_prompt);
  }
  if (prompt.ok() != roles_known) Fail("Apply's result does not match the roles' validity");
  if (!prompt.ok()) {
    if (prompt.status().code() != absl::StatusCode::kInvalidArgument ||
        prompt.status().message().empty()) {
      Fail("a bad role not rejected as InvalidArgument with a message");
    }
    return 0;
  }
  CheckRendered(*prompt, messages, add_generation_prompt);
  if (encode && !prompt->empty()) CheckEncodes(*prompt);
  return 0;
}
