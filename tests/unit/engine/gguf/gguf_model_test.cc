// The default model (SmolLM2-135M-Instruct Q4_1) opens and has the layout
// llama.cpp reports for it. The model is found through $TANDEM_MODEL, else
// models/ in the source tree; the test is skipped when neither exists.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/gguf/dequantize.h"
#include "engine/gguf/gguf_file.h"
#include "gtest/gtest.h"

namespace tandem::gguf {
namespace {

std::string ModelPath() {
  const char* env = std::getenv("TANDEM_MODEL");
  if (env != nullptr && env[0] != '\0') return env;
  return TANDEM_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(GgufModelTest, DefaultModelLayout) {
  const std::string path = ModelPath();
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "model not found at " << path << " (run scripts/fetch-model.sh)";
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> opened = GgufFile::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.tensors().size(), 272u);
  EXPECT_EQ(*file.GetString("general.architecture"), "llama");
  EXPECT_EQ(*file.GetInt("llama.block_count"), 30);
  EXPECT_EQ(*file.GetInt("llama.embedding_length"), 576);
  EXPECT_EQ(*file.GetInt("llama.attention.head_count"), 9);
  EXPECT_EQ(*file.GetInt("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(*file.GetInt("llama.feed_forward_length"), 1536);
  absl::StatusOr<std::vector<std::string>> tokens = file.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 49152u);

  const TensorInfo* embd = file.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::kQ8_0);
  EXPECT_EQ(embd->dims, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(embd->rows(), 49152);
  EXPECT_EQ(embd->row_bytes(), 576 / 32 * 34);

  const TensorInfo* wq = file.FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->type, GgmlType::kQ4_1);
  EXPECT_EQ(wq->dims, (std::vector<int64_t>{576, 576}));
  const TensorInfo* norm = file.FindTensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, GgmlType::kF32);
  EXPECT_EQ(norm->dims, (std::vector<int64_t>{576}));

  // Every tensor's first row dequantizes to finite values.
  for (const TensorInfo& t : file.tensors()) {
    std::vector<float> row(t.cols());
    ASSERT_TRUE(DequantizeRow(t.type, t.data, t.cols(), row.data()).ok()) << t.name;
    for (float v : row) ASSERT_TRUE(std::isfinite(v)) << t.name;
  }
}

}  // namespace
}  // namespace tandem::gguf
