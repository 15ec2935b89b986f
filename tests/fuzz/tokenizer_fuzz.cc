// libFuzzer target for the default model's tokenizer (engine/tokenizer) on
// arbitrary bytes. The first byte picks the mode:
//   even: the rest is text. Encode it without and with special-token parsing
//     and Decode the ids. bpe_tokenizer.h promises Decode(Encode(x)) == x
//     byte for byte whenever the vocab has a token for every byte of x
//     (invalid UTF-8 included; control-token texts decode to themselves), so
//     that is asserted for both; the SmolLM2 bytes without a token are
//     dropped, so for those inputs only "no crash" is checked.
//   odd: the rest is little-endian int32 token ids (some out of range).
//     Decode fails exactly when an id is outside the vocabulary.
// In both modes the IncrementalDetokenizer fed the same ids token by token
// must return valid UTF-8 chunks only, and their concatenation must equal
// Decode whenever Decode's result is valid UTF-8 (its header's contract),
// with and without skip_special.
//
// The model is $TANDEM_MODEL (run_fuzz.sh sets it), else the default model
// under models/. Built by run_fuzz.sh.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "tests/fuzz/fuzz_vocab.h"

namespace {

using tandem::tokenizer::IncrementalDetokenizer;
using tandem::tokenizer::Tokenizer;

const Tokenizer* g_tokenizer = nullptr;
// byte_has_token[b]: the vocab has a token for the single byte b.
std::array<bool, 256> g_byte_has_token{};

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "tokenizer_fuzz invariant broken: %s\n", what);
  std::abort();
}

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t min = 0;
    uint32_t cp = 0;
    if (b0 < 0x80) {
      ++i;
      continue;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = b0 & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

bool EveryByteHasToken(std::string_view text) {
  for (char c : text) {
    if (!g_byte_has_token[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

// Streams `ids` through an IncrementalDetokenizer and checks its contract
// against `decoded` (Decode of the same ids with the same skip_special; null
// when Decode failed).
void CheckIncremental(std::span<const int32_t> ids, bool skip_special,
                      const std::string* decoded) {
  IncrementalDetokenizer detok(*g_tokenizer, skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string chunk = detok.Append(id);
    if (!IsValidUtf8(chunk)) Fail("an incremental chunk that is not valid UTF-8");
    streamed += chunk;
  }
  const std::string tail = detok.Flush();
  if (!IsValidUtf8(tail)) Fail("the flushed tail is not valid UTF-8");
  streamed += tail;
  if (streamed != detok.text()) Fail("text() differs from the chunks returned");
  if (decoded != nullptr && IsValidUtf8(*decoded) && streamed != *decoded) {
    Fail("the incremental text differs from Decode on valid UTF-8");
  }
}

void CheckIds(std::span<const int32_t> ids) {
  bool in_range = true;
  for (int32_t id : ids) in_range = in_range && id >= 0 && id < g_tokenizer->vocab_size();
  for (bool skip_special : {false, true}) {
    absl::StatusOr<std::string> decoded = g_tokenizer->Decode(ids, skip_special);
    if (decoded.ok() != in_range) Fail("Decode's error does not match the ids' range");
    if (!decoded.ok()) {
      if (decoded.status().message().empty()) Fail("a Decode error without a message");
      // Out-of-range ids add no text to the stream; the rest must still be
      // valid UTF-8 chunks.
      CheckIncremental(ids, skip_special, nullptr);
      continue;
    }
    CheckIncremental(ids, skip_special, &*decoded);
  }
}

void CheckText(std::string_view text) {
  const bool round_trips = EveryByteHasToken(text);
  for (bool parse_special : {false, true}) {
    const std::vector<int32_t> ids = g_tokenizer->Encode(text, /*add_special=*/false, parse_special);
    for (int32_t id : ids) {
      if (id < 0 || id >= g_tokenizer->vocab_size()) Fail("Encode returned an id out of range");
    }
    absl::StatusOr<std::string> decoded = g_tokenizer->Decode(ids, /*skip_special=*/false);
    if (!decoded.ok()) Fail("Decode failed on Encode's ids");
    if (round_trips && *decoded != text) {
      Fail(parse_special ? "decode(encode(x, parse_special)) != x"
                         : "decode(encode(x)) != x");
    }
    CheckIds(ids);
  }
  // As the coordinator encodes prompts: BOS / EOS as the vocab says.
  const std::vector<int32_t> served = g_tokenizer->Encode(text, /*add_special=*/true, true);
  if (!g_tokenizer->Decode(served, true).ok()) Fail("Decode failed on a served prompt");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto tokenizer = Tokenizer::Create(tandem::fuzz::LoadFuzzVocab("tokenizer_fuzz"));
  if (!tokenizer.ok()) {
    tandem::fuzz::Die("tokenizer_fuzz", "creating the tokenizer", tokenizer.status());
  }
  g_tokenizer = tokenizer->release();  // lives as long as the process
  for (int b = 0; b < 256; ++b) {
    std::string piece;
    tandem::tokenizer::AppendByteEncoded(std::string(1, static_cast<char>(b)), piece);
    g_byte_has_token[b] = g_tokenizer->TokenId(piece).ok();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    CheckText(rest);
    return 0;
  }
  std::vector<int32_t> ids(rest.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
  // Mostly in range (so Decode and the stream run), sometimes not: an id
  // with the top bit set is kept as is.
  for (int32_t& id : ids) {
    if (id >= 0) id %= g_tokenizer->vocab_size() + 2;
  }
  CheckIds(ids);
  return 0;
}
