#include "engine/tokenizer/incremental_detokenizer.h"

namespace tandem::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Number of bytes a sequence starting with `lead` has, 0 for a byte that
// cannot start one.
int SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation bytes, C0/C1 (always overlong), F5..FF
}

// Whether `b` may follow `lead` as the second byte (Unicode Table 3-7: this
// excludes overlong forms, surrogates and values past U+10FFFF).
bool ValidSecondByte(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

}  // namespace

size_t ConsumeCompleteUtf8(std::string_view bytes, bool final, std::string& out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const uint8_t lead = static_cast<uint8_t>(bytes[pos]);
    const int length = SequenceLength(lead);
    if (length == 0) {
      out += kReplacement;
      ++pos;
      continue;
    }
    // Count the bytes that continue the sequence validly.
    int valid = 1;
    while (valid < length && pos + valid < bytes.size()) {
      const uint8_t b = static_cast<uint8_t>(bytes[pos + valid]);
      const bool ok = valid == 1 ? ValidSecondByte(lead, b) : (b & 0xC0) == 0x80;
      if (!ok) break;
      ++valid;
    }
    if (valid == length) {
      out.append(bytes.substr(pos, length));
      pos += length;
    } else if (pos + valid == bytes.size() && !final) {
      break;  // a valid prefix still waiting for its next bytes
    } else {
      out += kReplacement;  // maximal subpart that can never complete
      pos += valid;
    }
  }
  return pos;
}

std::string IncrementalDetokenizer::Drain(bool final) {
  std::string out;
  const size_t consumed = ConsumeCompleteUtf8(pending_, final, out);
  pending_.erase(0, consumed);
  text_ += out;
  return out;
}

std::string IncrementalDetokenizer::Append(int32_t token) {
  if (skip_special_ && tokenizer_.IsSkippedWhenSkippingSpecial(token)) return "";
  const std::string& piece = tokenizer_.TokenToPiece(token);
  if (piece.empty()) return "";
  pending_ += piece;
  return Drain(/*final=*/false);
}

std::string IncrementalDetokenizer::Flush() { return Drain(/*final=*/true); }

std::string DecodeValidUtf8(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                            bool skip_special) {
  IncrementalDetokenizer detokenizer(tokenizer, skip_special);
  std::string text;
  for (int32_t id : ids) text += detokenizer.Append(id);
  return text + detokenizer.Flush();
}

}  // namespace tandem::tokenizer
