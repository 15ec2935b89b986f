#include "engine/tokenizer/byte_unicode.h"

#include <array>

#include "engine/tokenizer/unicode_categories.h"

namespace tandem::tokenizer {
namespace {

constexpr bool IsPrintableByte(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<uint32_t, 256> byte_to_cpt{};
  // Every image lies below U+0100 + 68.
  std::array<int16_t, 0x100 + 68> cpt_to_byte{};

  constexpr ByteTables() {
    for (auto& b : cpt_to_byte) b = -1;
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = IsPrintableByte(b) ? b : 0x100 + next++;
      byte_to_cpt[b] = cpt;
      cpt_to_byte[cpt] = static_cast<int16_t>(b);
    }
  }
};
constexpr ByteTables kTables;

}  // namespace

uint32_t ByteToCodepoint(uint8_t byte) { return kTables.byte_to_cpt[byte]; }

int CodepointToByte(uint32_t cpt) {
  return cpt < kTables.cpt_to_byte.size() ? kTables.cpt_to_byte[cpt] : -1;
}

void AppendByteEncoded(std::string_view bytes, std::string& out) {
  for (char c : bytes) AppendUtf8(ByteToCodepoint(static_cast<uint8_t>(c)), out);
}

std::string ByteDecode(std::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  for (size_t pos = 0; pos < token_text.size();) {
    const DecodedCodepoint d = DecodeUtf8(token_text, pos);
    const int byte = d.cpt == kInvalidCodepoint ? -1 : CodepointToByte(d.cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(token_text.substr(pos, d.length));
    }
    pos += d.length;
  }
  return out;
}

}  // namespace tandem::tokenizer
