// Splits text into the words that byte-level BPE merges within.
#ifndef TANDEM_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
#define TANDEM_ENGINE_TOKENIZER_PRE_TOKENIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::tokenizer {

// The splitting rules a vocabulary was trained with (GGUF tokenizer.ggml.pre).
enum class PreTokenizerKind {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // SmolLM: every \p{N} code point is its own word first, then GPT-2 within.
  kSmolLm,
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  // (and its vocabularies skip BPE for words that are whole tokens).
  kLlama3,
};

// Splits text the way llama.cpp does for a given tokenizer.ggml.pre, with
// hand-written matchers over code points instead of a regex engine (the
// matchers reproduce llama.cpp's own hand-written ones, including how a
// lookahead stops at the end of a word produced by an earlier split).
//
// Invalid UTF-8 never fails: each byte that does not start a valid sequence is
// one code point of the "other" class (like punctuation), so the words still
// cover the input byte for byte.
//
// Thread-safety: immutable after Create(); all methods are const and safe to
// call concurrently.
class PreTokenizer {
 public:
  // Maps a GGUF tokenizer.ggml.pre name to its rules: "gpt2", "gpt-2" ->
  // kGpt2; "smollm" -> kSmolLm; "llama3", "llama-v3", "llama-bpe" -> kLlama3.
  // Fails with Unimplemented naming `name` for anything else (including
  // llama.cpp's "default", a different four-regex cascade).
  static absl::StatusOr<PreTokenizer> Create(std::string_view name);

  explicit PreTokenizer(PreTokenizerKind kind) : kind_(kind) {}

  PreTokenizerKind kind() const { return kind_; }

  // Returns consecutive, non-empty views into `text` whose concatenation is
  // exactly `text` (empty result for empty text).
  std::vector<std::string_view> Split(std::string_view text) const;

 private:
  PreTokenizerKind kind_;
};

}  // namespace tandem::tokenizer

#endif  // TANDEM_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
