#include "engine/tokenizer/incremental_detokenizer.h"

#include <string>
#include <vector>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/unicode_categories.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/tokenizer/tokenizer_test_util.h"

namespace tandem::tokenizer {
namespace {

// A vocabulary of the 256 single bytes, so a test can stream any byte string.
std::unique_ptr<Tokenizer> ByteTokenizer() {
  Vocab vocab;
  for (int b = 0; b < 256; ++b) {
    std::string text;
    AppendByteEncoded(std::string(1, static_cast<char>(b)), text);
    vocab.tokens.push_back(text);
    vocab.types.push_back(TokenType::kNormal);
  }
  vocab.tokens.push_back("<|im_end|>");
  vocab.types.push_back(TokenType::kControl);
  auto t = Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// Streams `bytes` one byte token at a time; returns the chunks, Flush last.
std::vector<std::string> Stream(const Tokenizer& t, std::string_view bytes) {
  IncrementalDetokenizer detok(t);
  std::vector<std::string> chunks;
  for (unsigned char b : bytes) chunks.push_back(detok.Append(b));
  chunks.push_back(detok.Flush());
  std::string all;
  for (const auto& c : chunks) all += c;
  EXPECT_EQ(all, detok.text());
  return chunks;
}

std::string Join(const std::vector<std::string>& chunks) {
  std::string all;
  for (const auto& c : chunks) all += c;
  return all;
}

TEST(IncrementalDetokenizerTest, HoldsBackIncompleteCharacters) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  const auto chunks = Stream(*t, "a😀b");
  ASSERT_EQ(chunks.size(), 7u);
  EXPECT_EQ(chunks[0], "a");
  EXPECT_EQ(chunks[1], "");
  EXPECT_EQ(chunks[2], "");
  EXPECT_EQ(chunks[3], "");
  EXPECT_EQ(chunks[4], "😀");
  EXPECT_EQ(chunks[5], "b");
  EXPECT_EQ(chunks[6], "");
}

TEST(IncrementalDetokenizerTest, InvalidSequencesBecomeReplacementCharacters) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  // Stray continuation byte: replaced at once.
  EXPECT_EQ(Stream(*t, "a\x80z")[1], "\xEF\xBF\xBD");
  // Truncated sequence followed by ASCII: one U+FFFD for the maximal subpart.
  EXPECT_EQ(Join(Stream(*t, "\xE2\x82x")), "\xEF\xBF\xBDx");
  // Surrogate and overlong forms never become valid.
  EXPECT_EQ(Join(Stream(*t, "\xED\xA0\x80")), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Join(Stream(*t, "\xC0\xAF")), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // Incomplete at the end: Flush replaces it.
  const auto chunks = Stream(*t, "ok\xF0\x9F\x98");
  EXPECT_EQ(chunks.back(), "\xEF\xBF\xBD");
  EXPECT_EQ(Join(chunks), "ok\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizerTest, EveryChunkIsValidUtf8ForRandomBytes) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  uint32_t state = 99;
  for (int round = 0; round < 300; ++round) {
    std::string bytes;
    for (int i = 0; i < 30; ++i) {
      state = state * 1664525u + 1013904223u;
      bytes.push_back(static_cast<char>(state >> 24));
    }
    for (const auto& chunk : Stream(*t, bytes)) EXPECT_TRUE(IsValidUtf8(chunk));
  }
}

TEST(IncrementalDetokenizerTest, SkipSpecial) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer keep(*t), skip(*t, /*skip_special=*/true);
  for (int32_t id : {int32_t{'h'}, int32_t{'i'}, int32_t{256}}) {
    keep.Append(id);
    skip.Append(id);
  }
  EXPECT_EQ(keep.text(), "hi<|im_end|>");
  EXPECT_EQ(skip.text(), "hi");
  EXPECT_EQ(skip.Append(-1), "");  // out of range: no text
}

// A whole response's text (beam results, /detokenize): the chunks joined,
// valid UTF-8 where Decode keeps a cut character's bytes.
TEST(IncrementalDetokenizerTest, DecodeValidUtf8IsTheJoinedStream) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  const std::vector<int32_t> cut = {'a', 0xF0, 0x9F, 0x98, 256};  // "a" + 3 of 😀's 4 bytes
  EXPECT_EQ(DecodeValidUtf8(*t, cut, /*skip_special=*/true), "a\xEF\xBF\xBD");
  EXPECT_EQ(DecodeValidUtf8(*t, cut, /*skip_special=*/false), "a\xEF\xBF\xBD<|im_end|>");
  const absl::StatusOr<std::string> raw = t->Decode(cut, /*skip_special=*/true);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_FALSE(IsValidUtf8(*raw));
  const std::vector<int32_t> whole = {'a', 0xF0, 0x9F, 0x98, 0x80, -1};
  EXPECT_EQ(DecodeValidUtf8(*t, whole, /*skip_special=*/true), "a😀");
}

TEST(IncrementalDetokenizerTest, StreamsEveryReferenceTextLikeDecode) {
  auto tokenizer = testing::LoadModelTokenizer();
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const auto data = testing::ReadReferenceData();
  ASSERT_GE(data.cases.size(), 60u);
  for (const auto& c : data.cases) {
    for (bool skip_special : {false, true}) {
      IncrementalDetokenizer detok(**tokenizer, skip_special);
      std::string streamed;
      for (int32_t id : c.ids_special) {
        const std::string chunk = detok.Append(id);
        EXPECT_TRUE(IsValidUtf8(chunk)) << "text: " << c.text;
        streamed += chunk;
      }
      streamed += detok.Flush();
      EXPECT_EQ(streamed, *(*tokenizer)->Decode(c.ids_special, skip_special));
      EXPECT_EQ(streamed, detok.text());
      if (!skip_special) {
        EXPECT_EQ(streamed, c.text);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::tokenizer
