#include "engine/tokenizer/vocab.h"

#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/tokenizer/tokenizer_test_util.h"

namespace tandem::tokenizer {
namespace {

absl::StatusOr<Vocab> LoadFrom(const gguf::GgufWriter& writer) {
  auto file = gguf::GgufFile::FromBuffer(writer.Serialize());
  if (!file.ok()) return file.status();
  return LoadVocabFromGguf(**file);
}

gguf::GgufWriter SmallGpt2File() {
  gguf::GgufWriter w;
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "smollm");
  w.AddStringArray("tokenizer.ggml.tokens", {"<|endoftext|>", "a", "b", "ab"});
  w.AddInt32Array("tokenizer.ggml.token_type", {3, 1, 1, 1});
  w.AddStringArray("tokenizer.ggml.merges", {"a b"});
  w.AddUint32("tokenizer.ggml.eos_token_id", 0);
  return w;
}

TEST(VocabTest, LoadsTheDefaultModel) {
  auto vocab = testing::LoadModelVocab();
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->model, "gpt2");
  EXPECT_EQ(vocab->pre, "smollm");
  EXPECT_EQ(vocab->size(), 49152);
  EXPECT_EQ(vocab->types.size(), 49152u);
  EXPECT_EQ(vocab->merges.size(), 48900u);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_EQ(vocab->pad_id, 2);
  EXPECT_FALSE(vocab->add_bos);
  EXPECT_FALSE(vocab->add_eos);
  EXPECT_EQ(vocab->tokens[1], "<|im_start|>");
  EXPECT_EQ(vocab->types[1], TokenType::kControl);
  EXPECT_EQ(vocab->types[17], TokenType::kNormal);
  EXPECT_NE(vocab->chat_template.find("<|im_start|>"), std::string::npos);
}

TEST(VocabTest, LoadsASmallFileWithDefaults) {
  auto vocab = LoadFrom(SmallGpt2File());
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->size(), 4);
  EXPECT_EQ(vocab->types[0], TokenType::kControl);
  EXPECT_EQ(vocab->eos_id, 0);
  EXPECT_EQ(vocab->bos_id, kNoToken);
  EXPECT_EQ(vocab->unk_id, kNoToken);
  EXPECT_FALSE(vocab->add_bos);
  EXPECT_TRUE(vocab->chat_template.empty());
}

TEST(VocabTest, MissingTokenTypesMeanNormal) {
  gguf::GgufWriter w;
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "llama-bpe");
  w.AddStringArray("tokenizer.ggml.tokens", {"x", "y"});
  w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  auto vocab = LoadFrom(w);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->types, (std::vector<TokenType>{TokenType::kNormal, TokenType::kNormal}));
  EXPECT_TRUE(vocab->add_bos);  // the Llama 3 default
}

TEST(VocabTest, SentencePieceIsUnimplemented) {
  gguf::GgufWriter w = SmallGpt2File();
  w.AddString("tokenizer.ggml.model", "llama");
  auto vocab = LoadFrom(w);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(vocab.status().message().find("\"llama\""), std::string::npos) << vocab.status();
}

TEST(VocabTest, RejectsInconsistentFiles) {
  gguf::GgufWriter bad_id = SmallGpt2File();
  bad_id.AddUint32("tokenizer.ggml.eos_token_id", 4);
  auto vocab = LoadFrom(bad_id);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(vocab.status().message().find("4"), std::string::npos);
  EXPECT_NE(vocab.status().message().find("eos"), std::string::npos);

  gguf::GgufWriter bad_types = SmallGpt2File();
  bad_types.AddInt32Array("tokenizer.ggml.token_type", {3, 1, 1});
  vocab = LoadFrom(bad_types);
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("3 entries"), std::string::npos) << vocab.status();

  gguf::GgufWriter bad_type_value = SmallGpt2File();
  bad_type_value.AddInt32Array("tokenizer.ggml.token_type", {3, 1, 9, 1});
  vocab = LoadFrom(bad_type_value);
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("type 9"), std::string::npos) << vocab.status();

  gguf::GgufWriter no_tokens;
  no_tokens.AddString("tokenizer.ggml.model", "gpt2");
  vocab = LoadFrom(no_tokens);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), absl::StatusCode::kNotFound);

  gguf::GgufWriter add_bos = SmallGpt2File();
  add_bos.AddBool("tokenizer.ggml.add_bos_token", true);  // but no bos id
  EXPECT_FALSE(LoadFrom(add_bos).ok());
}

}  // namespace
}  // namespace tandem::tokenizer
