// Byte-level BPE on small hand-built vocabularies (the model-based checks
// against llama.cpp live in reference_test.cc).
#include "engine/tokenizer/bpe_tokenizer.h"

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/tokenizer/byte_unicode.h"
#include "gtest/gtest.h"

namespace tandem::tokenizer {
namespace {

std::string Encoded(std::string_view bytes) {
  std::string out;
  AppendByteEncoded(bytes, out);
  return out;
}

// Tokens 0..255 are the single bytes (in byte-encoded form), then `extra`.
Vocab ByteVocab(const std::vector<std::pair<std::string, TokenType>>& extra,
                std::vector<std::string> merges) {
  Vocab vocab;
  vocab.pre = "gpt2";
  for (int b = 0; b < 256; ++b) {
    vocab.tokens.push_back(Encoded(std::string(1, static_cast<char>(b))));
    vocab.types.push_back(TokenType::kNormal);
  }
  for (const auto& [text, type] : extra) {
    vocab.tokens.push_back(text);
    vocab.types.push_back(type);
  }
  vocab.merges = std::move(merges);
  return vocab;
}

std::unique_ptr<Tokenizer> Make(Vocab vocab) {
  auto tokenizer = Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

int32_t Id(const Tokenizer& t, std::string_view piece) {
  auto id = t.TokenId(piece);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : -1;
}

TEST(ByteUnicodeTest, MappingIsTheGpt2One) {
  EXPECT_EQ(ByteToCodepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(ByteToCodepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(ByteToCodepoint('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(ByteToCodepoint(0xAD), 0x143u);  // soft hyphen is the last remapped byte
  for (int b = 0; b < 256; ++b) EXPECT_EQ(CodepointToByte(ByteToCodepoint(b)), b);
  EXPECT_EQ(CodepointToByte(0x4E2D), -1);
  EXPECT_EQ(ByteDecode("Ġhello"), " hello");
}

TEST(BpeTokenizerTest, MergesByRankThenLeftmost) {
  auto t = Make(ByteVocab({{"ab", TokenType::kNormal}, {"bc", TokenType::kNormal},
                           {"aa", TokenType::kNormal}},
                          {"b c", "a b", "a a"}));
  ASSERT_NE(t, nullptr);
  // "b c" has the lower rank, so it wins over "a b".
  EXPECT_EQ(t->Encode("abc", false, false), (std::vector<int32_t>{'a', Id(*t, "bc")}));
  EXPECT_EQ(t->Encode("ab", false, false), (std::vector<int32_t>{Id(*t, "ab")}));
  // Equal ranks merge leftmost first.
  EXPECT_EQ(t->Encode("aaa", false, false), (std::vector<int32_t>{Id(*t, "aa"), 'a'}));
}

TEST(BpeTokenizerTest, ChainsMergesAcrossWords) {
  auto t = Make(ByteVocab({{"he", TokenType::kNormal}, {"ll", TokenType::kNormal},
                           {"hell", TokenType::kNormal}, {"hello", TokenType::kNormal},
                           {"Ġw", TokenType::kNormal}},
                          {"h e", "l l", "he ll", "hell o", "Ġ w"}));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("hello world", false, false),
            (std::vector<int32_t>{Id(*t, "hello"), Id(*t, "Ġw"), 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(*t->Decode(t->Encode("hello world", false, false), false), "hello world");
}

TEST(BpeTokenizerTest, MergeResultOutsideVocabFallsBackToCharacters) {
  auto t = Make(ByteVocab({}, {"x y"}));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("xy", false, false), (std::vector<int32_t>{'x', 'y'}));
}

TEST(BpeTokenizerTest, SpecialTokensLongestFirst) {
  auto t = Make(ByteVocab({{"<a>", TokenType::kControl},
                           {"<a><b>", TokenType::kControl},
                           {"<u>", TokenType::kUserDefined}},
                          {}));
  ASSERT_NE(t, nullptr);
  const int32_t a = Id(*t, "<a>"), ab = Id(*t, "<a><b>"), u = Id(*t, "<u>");
  EXPECT_EQ(t->Encode("<a><b><a>", false, true), (std::vector<int32_t>{ab, a}));
  EXPECT_EQ(t->Encode("x<a>y", false, true), (std::vector<int32_t>{'x', a, 'y'}));
  // Without parse_special, control texts are plain text; user-defined ones
  // still match.
  EXPECT_EQ(t->Encode("<a><u>", false, false), (std::vector<int32_t>{'<', 'a', '>', u}));
  EXPECT_TRUE(t->IsControl(a));
  EXPECT_FALSE(t->IsControl(u));
  EXPECT_EQ(t->TokenToPiece(a), "<a>");
  EXPECT_EQ(*t->Decode(std::vector<int32_t>{'x', a, u}, /*skip_special=*/true), "x<u>");
  EXPECT_EQ(*t->Decode(std::vector<int32_t>{'x', a, u}, /*skip_special=*/false), "x<a><u>");
}

TEST(BpeTokenizerTest, AddSpecialFollowsFlags) {
  Vocab vocab = ByteVocab({{"<s>", TokenType::kControl}, {"</s>", TokenType::kControl}}, {});
  vocab.bos_id = 256;
  vocab.eos_id = 257;
  vocab.add_bos = true;
  vocab.add_eos = true;
  auto t = Make(vocab);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("a", true, false), (std::vector<int32_t>{256, 'a', 257}));
  EXPECT_EQ(t->Encode("a", false, false), (std::vector<int32_t>{'a'}));
  EXPECT_EQ(t->Encode("", true, false), (std::vector<int32_t>{256, 257}));
  EXPECT_EQ(t->EndOfGenerationIds(), (std::vector<int32_t>{257}));
  vocab.add_eos = false;
  t = Make(vocab);
  EXPECT_EQ(t->Encode("a", true, false), (std::vector<int32_t>{256, 'a'}));
}

TEST(BpeTokenizerTest, EndOfTurnTextsBecomeControl) {
  auto t = Make(ByteVocab({{"<|im_end|>", TokenType::kNormal}}, {}));
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->IsControl(256));
  EXPECT_TRUE(t->IsEndOfGeneration(256));
  EXPECT_EQ(t->Encode("a<|im_end|>", false, true), (std::vector<int32_t>{'a', 256}));
}

TEST(BpeTokenizerTest, UnusedAndByteTokensDecodeToNothing) {
  auto t = Make(ByteVocab({{"zz", TokenType::kUnused}, {"<0x41>", TokenType::kByte}}, {}));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->TokenToPiece(256), "");
  EXPECT_EQ(t->TokenToPiece(257), "");
  EXPECT_EQ(t->TokenToPiece(-1), "");
  EXPECT_EQ(t->TokenToPiece(100000), "");
}

TEST(BpeTokenizerTest, DecodeRejectsOutOfRangeIds) {
  auto t = Make(ByteVocab({}, {}));
  ASSERT_NE(t, nullptr);
  for (int32_t bad : {256, -3}) {
    auto text = t->Decode(std::vector<int32_t>{'a', bad}, false);
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(text.status().message().find(std::to_string(bad)), std::string::npos)
        << text.status();
    EXPECT_NE(text.status().message().find("256"), std::string::npos) << text.status();
  }
}

TEST(BpeTokenizerTest, AnyBytesRoundTrip) {
  auto t = Make(ByteVocab({{"ab", TokenType::kNormal}}, {"a b"}));
  ASSERT_NE(t, nullptr);
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::string text(rng() % 50, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 8 == 0 ? 'a' + rng() % 2 : rng());
    const std::vector<int32_t> ids = t->Encode(text, false, true);
    EXPECT_EQ(*t->Decode(ids, false), text);
  }
}

TEST(BpeTokenizerTest, ConcurrentEncodeIsConsistent) {
  auto t = Make(ByteVocab({{"ab", TokenType::kNormal}}, {"a b"}));
  ASSERT_NE(t, nullptr);
  const std::string text = "abab cab, ab!";
  const std::vector<int32_t> expected = t->Encode(text, false, true);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 2000; ++k) mismatches[i] += t->Encode(text, false, true) != expected;
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(BpeTokenizerTest, CreateRejectsBadVocabs) {
  Vocab llama = ByteVocab({}, {});
  llama.model = "llama";
  auto t = Tokenizer::Create(llama);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(t.status().message().find("llama"), std::string::npos);

  Vocab pre = ByteVocab({}, {});
  pre.pre = "mystery";
  t = Tokenizer::Create(pre);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("mystery"), std::string::npos);

  Vocab bos = ByteVocab({}, {});
  bos.bos_id = 300;
  t = Tokenizer::Create(bos);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("300"), std::string::npos);
  EXPECT_NE(t.status().message().find("256"), std::string::npos);

  Vocab types = ByteVocab({}, {});
  types.types.pop_back();
  EXPECT_FALSE(Tokenizer::Create(types).ok());

  Vocab merge = ByteVocab({}, {"nospace"});
  t = Tokenizer::Create(merge);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nospace"), std::string::npos);
}

}  // namespace
}  // namespace tandem::tokenizer
