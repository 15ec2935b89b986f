// GPT-2's reversible byte <-> code point mapping used by byte-level BPE.
#ifndef TANDEM_ENGINE_TOKENIZER_BYTE_UNICODE_H_
#define TANDEM_ENGINE_TOKENIZER_BYTE_UNICODE_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tokenizer {

// Printable bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) map to the code
// point of the same value; the other 68 bytes map to U+0100.. in byte order
// (so ' ' is U+0120 'Ġ' and '\n' is U+010A 'Ċ'). Pure functions, thread-safe.
uint32_t ByteToCodepoint(uint8_t byte);

// Inverse of ByteToCodepoint; -1 for a code point no byte maps to.
int CodepointToByte(uint32_t cpt);

// Appends the UTF-8 of ByteToCodepoint(b) for every byte b of `bytes`.
void AppendByteEncoded(std::string_view bytes, std::string& out);

// Inverse of AppendByteEncoded for a token text: each code point that is the
// image of a byte becomes that byte; any other code point (or invalid UTF-8
// byte) is copied through unchanged, so nothing is lost.
std::string ByteDecode(std::string_view token_text);

}  // namespace tandem::tokenizer

#endif  // TANDEM_ENGINE_TOKENIZER_BYTE_UNICODE_H_
