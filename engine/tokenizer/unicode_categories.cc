#include "engine/tokenizer/unicode_categories.h"

#include <algorithm>
#include <array>

namespace tandem::tokenizer {
namespace {

// ASCII is by far the most common input; answer it from a flat table.
constexpr std::array<uint8_t, 128> MakeAsciiFlags() {
  std::array<uint8_t, 128> flags{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) flags[c] = kFlagLetter;
    if (c >= '0' && c <= '9') flags[c] = kFlagNumber;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) flags[c] = kFlagWhitespace;
  }
  return flags;
}
constexpr std::array<uint8_t, 128> kAsciiFlags = MakeAsciiFlags();

}  // namespace

uint8_t CodepointFlags(uint32_t cpt) {
  if (cpt < 128) return kAsciiFlags[cpt];
  const internal::CodepointRange* begin = internal::kCodepointRanges;
  const internal::CodepointRange* end = begin + internal::kNumCodepointRanges;
  // First range whose last >= cpt.
  const internal::CodepointRange* it = std::lower_bound(
      begin, end, cpt,
      [](const internal::CodepointRange& r, uint32_t c) { return r.last < c; });
  if (it == end || it->first > cpt) return 0;
  return it->flags;
}

DecodedCodepoint DecodeUtf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1};
  int length;
  uint32_t cpt;
  uint32_t min_value;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, cpt = b0 & 0x1F, min_value = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, cpt = b0 & 0x0F, min_value = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, cpt = b0 & 0x07, min_value = 0x10000;
  } else {
    return {kInvalidCodepoint, 1};
  }
  if (pos + length > text.size()) return {kInvalidCodepoint, 1};
  for (int i = 1; i < length; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return {kInvalidCodepoint, 1};
    cpt = (cpt << 6) | (b & 0x3F);
  }
  if (cpt < min_value || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) {
    return {kInvalidCodepoint, 1};
  }
  return {cpt, length};
}

void AppendUtf8(uint32_t cpt, std::string& out) {
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const DecodedCodepoint d = DecodeUtf8(text, pos);
    if (d.cpt == kInvalidCodepoint) return false;
    pos += d.length;
  }
  return true;
}

}  // namespace tandem::tokenizer
