// Checks the tokenizer against llama.cpp on the default model, using the data
// written by tests/reference/tokenizer/make_expected.py.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/tokenizer/tokenizer_test_util.h"

namespace tandem::tokenizer {
namespace {

using testing::LoadModelTokenizer;
using testing::ReadReferenceData;
using testing::ReferenceData;

class ReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tokenizer = LoadModelTokenizer();
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status() << " (model " << testing::ModelPath()
                                << ")";
    tokenizer_ = tokenizer->release();
    data_ = new ReferenceData(ReadReferenceData());
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete data_;
    tokenizer_ = nullptr;
    data_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(tokenizer_, nullptr);
    ASSERT_GE(data_->cases.size(), 60u) << "reference file missing or short";
  }

  static Tokenizer* tokenizer_;
  static ReferenceData* data_;
};
Tokenizer* ReferenceTest::tokenizer_ = nullptr;
ReferenceData* ReferenceTest::data_ = nullptr;

TEST_F(ReferenceTest, EncodeWithSpecialMatchesLlamaCpp) {
  for (const auto& c : data_->cases) {
    EXPECT_EQ(tokenizer_->Encode(c.text, /*add_special=*/false, /*parse_special=*/true),
              c.ids_special)
        << "text: \"" << c.text << "\"";
  }
}

TEST_F(ReferenceTest, EncodeWithoutSpecialMatchesLlamaCpp) {
  for (const auto& c : data_->cases) {
    EXPECT_EQ(tokenizer_->Encode(c.text, /*add_special=*/false, /*parse_special=*/false),
              c.ids_plain)
        << "text: \"" << c.text << "\"";
  }
}

TEST_F(ReferenceTest, DecodeMatchesLlamaCppAndRoundTrips) {
  for (const auto& c : data_->cases) {
    auto with_special = tokenizer_->Decode(c.ids_special, /*skip_special=*/false);
    ASSERT_TRUE(with_special.ok()) << with_special.status();
    EXPECT_EQ(*with_special, c.detok_special) << "text: \"" << c.text << "\"";
    EXPECT_EQ(*with_special, c.text);
    auto skipped = tokenizer_->Decode(c.ids_special, /*skip_special=*/true);
    ASSERT_TRUE(skipped.ok()) << skipped.status();
    EXPECT_EQ(*skipped, c.detok_plain) << "text: \"" << c.text << "\"";
    auto plain = tokenizer_->Decode(c.ids_plain, /*skip_special=*/true);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(*plain, c.text);  // no control tokens when not parsing them
  }
}

uint64_t Fnv1a64(uint64_t h, std::string_view bytes) {
  for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ULL;
  return h;
}

TEST_F(ReferenceTest, EveryPieceMatchesLlamaCpp) {
  const auto& vocab = data_->vocab;
  ASSERT_EQ(tokenizer_->vocab_size(), vocab["n_vocab"].get<int32_t>());
  for (bool special : {true, false}) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
      std::string piece = tokenizer_->TokenToPiece(id);
      if (!special && tokenizer_->IsSkippedWhenSkippingSpecial(id)) piece.clear();
      const uint32_t n = piece.size();
      const char len[4] = {char(n), char(n >> 8), char(n >> 16), char(n >> 24)};
      h = Fnv1a64(Fnv1a64(h, std::string_view(len, 4)), piece);
    }
    EXPECT_EQ(absl::StrFormat("%016x", h),
              vocab["pieces_fnv1a64"][special ? "special" : "plain"].get<std::string>())
        << "special=" << special;
  }
}

TEST_F(ReferenceTest, SpecialIdsMatchLlamaCpp) {
  const auto& vocab = data_->vocab;
  EXPECT_EQ(tokenizer_->bos_id(), vocab["bos"].get<int32_t>());
  EXPECT_EQ(tokenizer_->eos_id(), vocab["eos"].get<int32_t>());
  EXPECT_EQ(tokenizer_->EndOfGenerationIds(), vocab["eog_ids"].get<std::vector<int32_t>>());
  std::vector<int32_t> control;
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    if (tokenizer_->IsControl(id)) control.push_back(id);
    EXPECT_EQ(tokenizer_->IsEndOfGeneration(id),
              std::count(tokenizer_->EndOfGenerationIds().begin(),
                         tokenizer_->EndOfGenerationIds().end(), id) == 1);
  }
  EXPECT_EQ(control, vocab["control_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(*tokenizer_->TokenId("<|im_end|>"), 2);
  EXPECT_EQ(tokenizer_->TokenId("no such token").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ReferenceTest, AddSpecialFollowsVocabFlags) {
  // SmolLM2 sets add_bos_token = false and has no add_eos_token.
  EXPECT_EQ(tokenizer_->Encode("Hello", /*add_special=*/true, /*parse_special=*/true),
            tokenizer_->Encode("Hello", /*add_special=*/false, /*parse_special=*/true));
}

// Invalid UTF-8 is tokenized byte for byte (llama.cpp would first replace
// each bad byte with U+FFFD, losing it).
TEST_F(ReferenceTest, InvalidUtf8RoundTrips) {
  const std::string texts[] = {"abc\x80" "def", "\xE4\xB8 trunc", "\xED\xA0\x80 surrogate",
                               "\xF4\x90\x80\x80 too big", std::string("nul\0byte", 8),
                               "ok 😀\xF0\x9F\x98", "\xBF\xBF\xC3"};
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tokenizer_->Encode(text, false, true);
    auto decoded = tokenizer_->Decode(ids, false);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, text);
  }
}

// SmolLM2's vocab has no token for 21 byte values (0xC0, 0xC1, 0xF5..0xFF,
// some ASCII controls, ...). Like llama.cpp, those bytes are dropped.
TEST_F(ReferenceTest, BytesWithoutTokensAreDropped) {
  EXPECT_TRUE(tokenizer_->Encode("\xFF\xFE", false, true).empty());
  auto decoded = tokenizer_->Decode(tokenizer_->Encode("\xC0\xAF/x\x04y", false, true), false);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, "\xAF/xy");
}

// Holds all the reference texts concatenated, ~2,000+ tokens.
std::string LongPrompt(const ReferenceData& data) {
  std::string text;
  for (const auto& c : data.cases) text += c.text + "\n";
  while (text.size() < 9000) text += text;
  return text;
}

TEST_F(ReferenceTest, LongPromptIsFastAndRoundTrips) {
  const std::string text = LongPrompt(*data_);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer_->Encode(text, false, true);
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start).count();
  ASSERT_GE(ids.size(), 2000u);
  // Generous bound for a loaded, unoptimized CI machine; typically ~2 ms.
  EXPECT_LT(ms, 200.0) << ids.size() << " tokens";
  std::printf("encoded %zu bytes into %zu tokens in %.2f ms\n", text.size(), ids.size(), ms);
  auto decoded = tokenizer_->Decode(ids, false);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, text);
}

}  // namespace
}  // namespace tandem::tokenizer
