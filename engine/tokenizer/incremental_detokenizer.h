// Turns a stream of token ids into a stream of valid UTF-8 text chunks.
#ifndef TANDEM_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define TANDEM_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstdint>
#include <string>
#include <span>
#include <string_view>

#include "engine/tokenizer/bpe_tokenizer.h"

namespace tandem::tokenizer {

// Decodes one sequence token by token for streaming. A token may end in the
// middle of a multi-byte character (byte-level BPE splits emoji and CJK
// across tokens), so the bytes of an incomplete trailing character are held
// back until a later token completes it. Bytes that can never form a valid
// character (a stray continuation byte, a truncated sequence followed by
// something else, overlong forms, surrogates) are emitted as U+FFFD, one per
// maximal invalid subpart as Unicode recommends, once that is certain.
// For valid UTF-8 output the concatenation of all chunks equals
// Tokenizer::Decode of the same ids.
//
// Thread-safety: not thread-safe (one per sequence); the Tokenizer must
// outlive it.
class IncrementalDetokenizer {
 public:
  // With `skip_special`, control and unknown tokens (e.g. <|im_end|>) add no
  // text, as Tokenizer::Decode(ids, true).
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // Adds one token; returns the text that became complete (possibly empty),
  // always valid UTF-8. Ids outside the vocabulary add no text.
  std::string Append(int32_t token);

  // Ends the stream: any held-back incomplete character becomes U+FFFD.
  // Returns that text (possibly empty). Append may be called again afterwards
  // and starts from a clean state.
  std::string Flush();

  // Everything returned by Append / Flush so far.
  const std::string& text() const { return text_; }

 private:
  // Moves the complete prefix of pending_ to the result; with `final`, the
  // incomplete tail too (as U+FFFD).
  std::string Drain(bool final);

  const Tokenizer& tokenizer_;
  const bool skip_special_;
  std::string pending_;  // bytes not yet emitted: an incomplete character
  std::string text_;
};

// The whole text of `ids` as the streamed chunks would add up to: always
// valid UTF-8 (what a complete response carries), unlike Tokenizer::Decode,
// which returns the bytes as they are. Ids outside the vocabulary add none.
std::string DecodeValidUtf8(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                            bool skip_special);

// Length of the longest prefix of `bytes` that Drain may emit: whole valid
// characters, plus maximal invalid subparts (reported via `out` as U+FFFD).
// Exposed for tests. `out` receives the emitted text; returns bytes consumed.
size_t ConsumeCompleteUtf8(std::string_view bytes, bool final, std::string& out);

}  // namespace tandem::tokenizer

#endif  // TANDEM_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
