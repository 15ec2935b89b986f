// Unicode code point classification and UTF-8 decoding for the pre-tokenizer.
#ifndef TANDEM_ENGINE_TOKENIZER_UNICODE_CATEGORIES_H_
#define TANDEM_ENGINE_TOKENIZER_UNICODE_CATEGORIES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tokenizer {

// Flags of one code point, as the pre-tokenizer regexes see it. A code point
// with no flag is "other" (punctuation, symbols, marks, controls, unassigned).
enum CodepointFlag : uint8_t {
  kFlagLetter = 0x01,      // \p{L}: Lu, Ll, Lt, Lm, Lo.
  kFlagNumber = 0x02,      // \p{N}: Nd, Nl, No.
  kFlagWhitespace = 0x04,  // \s: the Unicode White_Space property.
};

// Returns the CodepointFlag bits of `cpt`; 0 for anything outside
// U+0000..U+10FFFF. Pure function, thread-safe.
uint8_t CodepointFlags(uint32_t cpt);

// One code point decoded from (possibly invalid) UTF-8.
struct DecodedCodepoint {
  uint32_t cpt;  // The code point, or kInvalidCodepoint for an invalid byte.
  int length;    // Bytes consumed, 1..4.
};

// Stands for one byte that does not start a valid UTF-8 sequence. It is
// outside the Unicode range, so it has no CodepointFlags (an "other" char).
inline constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFF;

// Decodes the code point starting at `text[pos]` (pos < text.size()). Strict
// UTF-8: overlong forms, surrogates, values past U+10FFFF, stray continuation
// bytes and truncated sequences decode as {kInvalidCodepoint, 1}, so every
// byte of any input is consumed exactly once. Thread-safe.
DecodedCodepoint DecodeUtf8(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of `cpt` (must be <= U+10FFFF) to `out`.
void AppendUtf8(uint32_t cpt, std::string& out);

// True when `text` is entirely well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

namespace internal {
// A run [first, last] of code points sharing `flags`; generated table in
// unicode_category_table.cc, sorted, non-overlapping.
struct CodepointRange {
  uint32_t first;
  uint32_t last;
  uint8_t flags;
};
extern const CodepointRange kCodepointRanges[];
extern const int kNumCodepointRanges;
}  // namespace internal

}  // namespace tandem::tokenizer

#endif  // TANDEM_ENGINE_TOKENIZER_UNICODE_CATEGORIES_H_
