#include "engine/tokenizer/pre_tokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/unicode_categories.h"
#include "gtest/gtest.h"

namespace tandem::tokenizer {
namespace {

using Words = std::vector<std::string>;

Words Split(std::string_view name, std::string_view text) {
  auto pre = PreTokenizer::Create(name);
  EXPECT_TRUE(pre.ok()) << pre.status();
  Words words;
  for (std::string_view w : pre->Split(text)) words.emplace_back(w);
  return words;
}

TEST(UnicodeCategoriesTest, Flags) {
  EXPECT_EQ(CodepointFlags('a'), kFlagLetter);
  EXPECT_EQ(CodepointFlags(0xE9), kFlagLetter);     // é
  EXPECT_EQ(CodepointFlags(0x4E2D), kFlagLetter);   // 中
  EXPECT_EQ(CodepointFlags(0x2F800), kFlagLetter);  // CJK compatibility supplement
  EXPECT_EQ(CodepointFlags('7'), kFlagNumber);
  EXPECT_EQ(CodepointFlags(0x0663), kFlagNumber);   // Arabic-Indic three
  EXPECT_EQ(CodepointFlags(0xB2), kFlagNumber);     // superscript two
  EXPECT_EQ(CodepointFlags(0x1D7D9), kFlagNumber);  // mathematical double-struck one
  EXPECT_EQ(CodepointFlags(' '), kFlagWhitespace);
  EXPECT_EQ(CodepointFlags('\n'), kFlagWhitespace);
  EXPECT_EQ(CodepointFlags(0xA0), kFlagWhitespace);
  EXPECT_EQ(CodepointFlags(0x3000), kFlagWhitespace);
  EXPECT_EQ(CodepointFlags(0x200B), 0);  // zero width space is not White_Space
  EXPECT_EQ(CodepointFlags('!'), 0);
  EXPECT_EQ(CodepointFlags(0x0301), 0);   // combining acute: a mark
  EXPECT_EQ(CodepointFlags(0x1F600), 0);  // emoji: a symbol
  EXPECT_EQ(CodepointFlags(0x110000), 0);
  EXPECT_EQ(CodepointFlags(kInvalidCodepoint), 0);
}

TEST(UnicodeCategoriesTest, DecodeUtf8) {
  EXPECT_EQ(DecodeUtf8("\xC3\xA9", 0).cpt, 0xE9u);
  EXPECT_EQ(DecodeUtf8("\xF0\x9F\x98\x80", 0).cpt, 0x1F600u);
  EXPECT_EQ(DecodeUtf8("\xF0\x9F\x98\x80", 0).length, 4);
  for (std::string_view bad : {"\x80", "\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                               "\xE2\x82", "\xFF"}) {
    EXPECT_EQ(DecodeUtf8(bad, 0).cpt, kInvalidCodepoint) << bad;
    EXPECT_EQ(DecodeUtf8(bad, 0).length, 1);
  }
  EXPECT_TRUE(IsValidUtf8("héllo 中 😀"));
  EXPECT_FALSE(IsValidUtf8("h\xC3llo"));
}

TEST(PreTokenizerTest, UnknownNameIsUnimplemented) {
  auto pre = PreTokenizer::Create("qwen2-unknown");
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(pre.status().message().find("qwen2-unknown"), std::string::npos);
  EXPECT_FALSE(PreTokenizer::Create("default").ok());
  EXPECT_FALSE(PreTokenizer::Create("").ok());
}

TEST(PreTokenizerTest, Gpt2) {
  EXPECT_EQ(Split("gpt2", ""), Words{});
  EXPECT_EQ(Split("gpt2", "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(Split("gpt2", "I'm here, they're"), (Words{"I", "'m", " here", ",", " they", "'re"}));
  EXPECT_EQ(Split("gpt2", "'S"), (Words{"'", "S"}));  // case-sensitive contractions
  EXPECT_EQ(Split("gpt2", "a   b"), (Words{"a", "  ", " b"}));
  EXPECT_EQ(Split("gpt2", "x\n\ny"), (Words{"x", "\n", "\n", "y"}));
  EXPECT_EQ(Split("gpt2", "a  \n b"), (Words{"a", "  \n", " b"}));
  EXPECT_EQ(Split("gpt2", "end  "), (Words{"end", "  "}));
  EXPECT_EQ(Split("gpt2", "123 4567x"), (Words{"123", " 4567", "x"}));
  EXPECT_EQ(Split("gpt2", "hello!!! ok?"), (Words{"hello", "!!!", " ok", "?"}));
  EXPECT_EQ(Split("gpt2", "\tcode"), (Words{"\t", "code"}));
  EXPECT_EQ(Split("gpt2", "día 中文"), (Words{"día", " 中文"}));
  EXPECT_EQ(Split("gpt-2", "a😀😀 b"), (Words{"a", "😀😀", " b"}));
}

TEST(PreTokenizerTest, SmolLmSplitsEveryDigit) {
  EXPECT_EQ(Split("smollm", "abc123"), (Words{"abc", "1", "2", "3"}));
  EXPECT_EQ(Split("smollm", "v 12"), (Words{"v", " ", "1", "2"}));
  EXPECT_EQ(Split("smollm", "x² ٣"), (Words{"x", "²", " ", "٣"}));
  // The lookahead of \s+(?!\S) ends at a digit's word boundary.
  EXPECT_EQ(Split("smollm", "a   1"), (Words{"a", "   ", "1"}));
  EXPECT_EQ(Split("smollm", "It's 2024!"), (Words{"It", "'s", " ", "2", "0", "2", "4", "!"}));
}

TEST(PreTokenizerTest, Llama3) {
  EXPECT_EQ(Split("llama3", "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(Split("llama3", "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(Split("llama3", "I'M HE'LL"), (Words{"I", "'M", " HE", "'LL"}));
  EXPECT_EQ(Split("llama3", "hello\n\nworld"), (Words{"hello", "\n\n", "world"}));
  EXPECT_EQ(Split("llama3", "a, b"), (Words{"a", ",", " b"}));
  EXPECT_EQ(Split("llama3", "foo!!\n\nbar"), (Words{"foo", "!!\n\n", "bar"}));
  EXPECT_EQ(Split("llama3", "  \n  x"), (Words{"  \n", " ", " x"}));
  EXPECT_EQ(Split("llama3", "\tword $x"), (Words{"\tword", " $", "x"}));
  EXPECT_EQ(Split("llama-bpe", "v2 "), (Words{"v", "2", " "}));
}

TEST(PreTokenizerTest, InvalidUtf8IsKeptByteForByte) {
  EXPECT_EQ(Split("gpt2", "a\xFF" "b"), (Words{"a", "\xFF", "b"}));
  EXPECT_EQ(Split("gpt2", " \xC3(x"), (Words{" \xC3(", "x"}));
}

TEST(PreTokenizerTest, WordsCoverRandomBytes) {
  std::mt19937 rng(1234);
  const std::string alphabet[] = {"a", "Z", "1", " ", "\n", "\r", "\t", "'", "s", "!",
                                  "é", "中", "😀", "\xFF", "\x80", "\xE4", "²", "\xC2\xA0"};
  for (const char* name : {"gpt2", "smollm", "llama3"}) {
    auto pre = PreTokenizer::Create(name);
    ASSERT_TRUE(pre.ok());
    for (int round = 0; round < 500; ++round) {
      std::string text;
      const int n = rng() % 40;
      for (int i = 0; i < n; ++i) text += alphabet[rng() % std::size(alphabet)];
      std::string joined;
      for (std::string_view w : pre->Split(text)) {
        EXPECT_FALSE(w.empty());
        joined += w;
      }
      EXPECT_EQ(joined, text) << name;
    }
  }
}

}  // namespace
}  // namespace tandem::tokenizer
