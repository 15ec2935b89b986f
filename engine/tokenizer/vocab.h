// The tokenizer vocabulary as stored in a GGUF file, and its loader.
#ifndef TANDEM_ENGINE_TOKENIZER_VOCAB_H_
#define TANDEM_ENGINE_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::gguf {
class GgufFile;
}  // namespace tandem::gguf

namespace tandem::tokenizer {

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Sentinel for "this special token does not exist".
inline constexpr int32_t kNoToken = -1;

// Plain data describing a vocabulary; no behaviour beyond Validate(). The
// tokenizer, chat template and tests build on this so they do not depend on
// the GGUF reader.
struct Vocab {
  // tokenizer.ggml.model; only "gpt2" (byte-level BPE) is supported.
  std::string model = "gpt2";
  // tokenizer.ggml.pre, the pre-tokenizer name (see PreTokenizer::Create).
  std::string pre = "gpt2";
  // Token texts as stored: byte-level BPE form for normal tokens (a space is
  // "Ġ"), literal text for control and user-defined tokens.
  std::vector<std::string> tokens;
  // One per token; all kNormal when the GGUF has no token types.
  std::vector<TokenType> types;
  // "left right" pairs in rank order (index = rank; lower merges first).
  std::vector<std::string> merges;
  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t unk_id = kNoToken;
  int32_t pad_id = kNoToken;
  // Whether Encode(add_special=true) prepends BOS / appends EOS.
  bool add_bos = false;
  bool add_eos = false;
  // tokenizer.chat_template (Jinja source), empty when absent.
  std::string chat_template;

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }

  // Checks internal consistency: at least one token, one type per token,
  // types within 0..6, special ids in [0, size) or kNoToken, add_bos/add_eos
  // only with the token present, every merge a "left right" pair. Does not
  // check the model or pre-tokenizer names (the tokenizer does). Fails with
  // InvalidArgument naming the offending value and the limit.
  absl::Status Validate() const;
};

// Reads the tokenizer.* metadata of `file` into a Vocab and validates it.
// Missing token types mean all normal; missing special ids mean kNoToken
// (llama.cpp's GPT-2 defaults of id 11 are not copied); add_bos / add_eos
// default to false except for Llama 3 pre-tokenizers, where BOS is added.
// Fails with Unimplemented naming the model for any tokenizer.ggml.model other
// than "gpt2" (e.g. "llama", SentencePiece), NotFound when tokens are
// missing, InvalidArgument for inconsistent data (see Vocab::Validate).
absl::StatusOr<Vocab> LoadVocabFromGguf(const gguf::GgufFile& file);

}  // namespace tandem::tokenizer

#endif  // TANDEM_ENGINE_TOKENIZER_VOCAB_H_
