#include "engine/tokenizer/pre_tokenizer.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode_categories.h"

namespace tandem::tokenizer {
namespace {

// Set on every code point inside the word being split, so that "no flags"
// means "past the end of the word" (where lookaheads see neither \s nor \S).
constexpr uint8_t kInWord = 0x80;
constexpr uint8_t kLetterNumberSpace = kFlagLetter | kFlagNumber | kFlagWhitespace;
constexpr uint32_t kOutOfWord = 0xFFFFFFFE;

// The input decoded once: code points, their flags and byte offsets.
struct DecodedText {
  std::vector<uint32_t> cpts;
  std::vector<uint8_t> flags;   // CodepointFlags | kInWord
  std::vector<size_t> offsets;  // byte offset of each code point, plus end

  explicit DecodedText(std::string_view text) {
    cpts.reserve(text.size());
    flags.reserve(text.size());
    offsets.reserve(text.size() + 1);
    for (size_t pos = 0; pos < text.size();) {
      const DecodedCodepoint d = DecodeUtf8(text, pos);
      cpts.push_back(d.cpt);
      flags.push_back(CodepointFlags(d.cpt) | kInWord);
      offsets.push_back(pos);
      pos += d.length;
    }
    offsets.push_back(text.size());
  }
};

// Matches one word-level split over code points [begin, end); appends the end
// index of every word found to `ends`.
class WordSplitter {
 public:
  WordSplitter(const DecodedText& text, size_t begin, size_t end,
               std::vector<size_t>& ends)
      : text_(text), begin_(begin), end_(end), ends_(ends) {}

  void SplitGpt2() {
    for (size_t pos = begin_; pos < end_;) {
      const uint32_t cpt = Cpt(pos);
      const uint8_t flags = Flags(pos);
      // 's|'t|'re|'ve|'m|'ll|'d
      if (cpt == '\'' && pos + 1 < end_) {
        const size_t len = ContractionLength(pos, /*ignore_case=*/false);
        if (len > 0) {
          pos = Add(pos + len);
          continue;
        }
      }
      uint8_t flags2 = cpt == ' ' ? Flags(pos + 1) : flags;
      // ` ?\p{L}+`, ` ?\p{N}+`
      for (uint8_t cls : {kFlagLetter, kFlagNumber}) {
        if (flags2 & cls) {
          pos += cpt == ' ';
          while (Flags(pos) & cls) ++pos;
          break;
        }
      }
      if (flags2 & (kFlagLetter | kFlagNumber)) {
        Add(pos);
        continue;
      }
      // ` ?[^\s\p{L}\p{N}]+`
      if (!(flags2 & kLetterNumberSpace) && flags2 != 0) {
        pos += cpt == ' ';
        while (IsOther(Flags(pos))) ++pos;
        Add(pos);
        continue;
      }
      pos = MatchWhitespace(pos, /*newline_rule=*/false);
    }
  }

  void SplitLlama3() {
    for (size_t pos = begin_; pos < end_;) {
      const uint32_t cpt = Cpt(pos);
      const uint8_t flags = Flags(pos);
      // (?i:'s|'t|'re|'ve|'m|'ll|'d)
      if (cpt == '\'' && pos + 1 < end_) {
        const size_t len = ContractionLength(pos, /*ignore_case=*/true);
        if (len > 0) {
          pos = Add(pos + len);
          continue;
        }
      }
      // [^\r\n\p{L}\p{N}]?\p{L}+
      if (!(cpt == '\r' || cpt == '\n' || (flags & kFlagNumber))) {
        if ((flags & kFlagLetter) || (Flags(pos + 1) & kFlagLetter)) {
          ++pos;
          while (Flags(pos) & kFlagLetter) ++pos;
          Add(pos);
          continue;
        }
      }
      // \p{N}{1,3}
      if (flags & kFlagNumber) {
        size_t first = pos;
        while (Flags(pos) & kFlagNumber) {
          if (++pos - first >= 3) {
            Add(pos);
            first = pos;
          }
        }
        Add(pos);
        continue;
      }
      // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (the `flags != 0` test is on the first
      // code point, as in llama.cpp, so a lone trailing space lands here).
      const uint8_t flags2 = cpt == ' ' ? Flags(pos + 1) : flags;
      if (!(flags2 & kLetterNumberSpace) && flags != 0) {
        pos += cpt == ' ';
        while (IsOther(Flags(pos))) ++pos;
        while (Cpt(pos) == '\r' || Cpt(pos) == '\n') ++pos;
        Add(pos);
        continue;
      }
      pos = MatchWhitespace(pos, /*newline_rule=*/true);
    }
  }

 private:
  uint32_t Cpt(size_t pos) const {
    return pos >= begin_ && pos < end_ ? text_.cpts[pos] : kOutOfWord;
  }
  uint8_t Flags(size_t pos) const {
    return pos >= begin_ && pos < end_ ? text_.flags[pos] : 0;
  }
  static bool IsOther(uint8_t flags) {
    return flags != 0 && !(flags & kLetterNumberSpace);
  }

  // Ends the current word at `end`; returns `end`.
  size_t Add(size_t end) {
    if (end > last_end_) ends_.push_back(end);
    last_end_ = end;
    return end;
  }

  // Length (2 or 3) of the contraction starting with the apostrophe at `pos`,
  // or 0. Only ASCII letters can match, so ASCII case folding is exact.
  size_t ContractionLength(size_t pos, bool ignore_case) const {
    const auto fold = [&](uint32_t c) {
      return ignore_case && c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
    };
    const uint32_t next = fold(Cpt(pos + 1));
    if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
    if (pos + 2 < end_) {
      const uint32_t next2 = fold(Cpt(pos + 2));
      if ((next == 'r' && next2 == 'e') || (next == 'v' && next2 == 'e') ||
          (next == 'l' && next2 == 'l')) {
        return 3;
      }
    }
    return 0;
  }

  // The whitespace alternatives at `pos`: (llama3 only) `\s*[\r\n]+`, then
  // `\s+(?!\S)`, then `\s+`; a single unmatched code point otherwise.
  // Returns the new position.
  size_t MatchWhitespace(size_t pos, bool newline_rule) {
    size_t num_spaces = 0;
    size_t last_newline_end = 0;
    while (Flags(pos + num_spaces) & kFlagWhitespace) {
      const uint32_t c = Cpt(pos + num_spaces);
      if (c == '\r' || c == '\n') last_newline_end = pos + num_spaces + 1;
      ++num_spaces;
    }
    if (newline_rule && last_newline_end > 0) return Add(last_newline_end);
    // A run followed by a non-space leaves its last space to that word.
    if (num_spaces > 1 && pos + num_spaces < end_) return Add(pos + num_spaces - 1);
    if (num_spaces > 0) return Add(pos + num_spaces);
    return Add(pos + 1);
  }

  const DecodedText& text_;
  const size_t begin_;
  const size_t end_;
  std::vector<size_t>& ends_;
  size_t last_end_ = begin_;
};

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::Create(std::string_view name) {
  if (name == "gpt2" || name == "gpt-2") return PreTokenizer(PreTokenizerKind::kGpt2);
  if (name == "smollm") return PreTokenizer(PreTokenizerKind::kSmolLm);
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe") {
    return PreTokenizer(PreTokenizerKind::kLlama3);
  }
  return absl::UnimplementedError(absl::StrCat(
      "pre-tokenizer \"", absl::string_view(name.data(), name.size()),
      "\" is not supported (supported: gpt2, gpt-2, smollm, llama3, llama-v3, "
      "llama-bpe)"));
}

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (text.empty()) return words;
  const DecodedText decoded(text);
  const size_t n = decoded.cpts.size();

  // Word ends (code point indices) of the first pass.
  std::vector<size_t> segments;
  if (kind_ == PreTokenizerKind::kSmolLm) {
    // \p{N}: each number code point alone, the runs between as they are.
    for (size_t i = 0; i < n; ++i) {
      if (decoded.flags[i] & kFlagNumber) {
        if (!segments.empty() ? segments.back() < i : i > 0) segments.push_back(i);
        segments.push_back(i + 1);
      }
    }
    if (segments.empty() || segments.back() < n) segments.push_back(n);
  } else {
    segments.push_back(n);
  }

  std::vector<size_t> ends;
  ends.reserve(n / 3 + 4);
  size_t begin = 0;
  for (size_t end : segments) {
    WordSplitter splitter(decoded, begin, end, ends);
    if (kind_ == PreTokenizerKind::kLlama3) {
      splitter.SplitLlama3();
    } else {
      splitter.SplitGpt2();
    }
    begin = end;
  }

  words.reserve(ends.size());
  size_t start = 0;
  for (size_t end : ends) {
    const size_t byte_begin = decoded.offsets[start];
    words.push_back(text.substr(byte_begin, decoded.offsets[end] - byte_begin));
    start = end;
  }
  return words;
}

}  // namespace tandem::tokenizer
