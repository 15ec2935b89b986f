// `tandem make-model`'s generator: known shapes, the streaming GGUF writer
// against Serialize(), generated files that load, run and tokenize,
// reproducibility by seed, and vocabulary copying.
#include "engine/model/model_generator.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/strong_id.h"
#include "engine/gguf/dequantize.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "engine/model/model_shapes.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::model {
namespace {

using ::absl::StatusCode;
using gguf::GgmlType;

// A fresh directory under the test temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("model_generator_test." + std::to_string(getpid()) + "." +
             std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// FNV-1a over 8-byte words (then the tail): cheap and good enough to tell
// two 150 MB files apart.
uint64_t HashFile(const std::string& path) {
  const std::string bytes = ReadAll(path);
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = (h ^ word) * 0x100000001b3ull;
  }
  for (; i < bytes.size(); ++i) h = (h ^ static_cast<uint8_t>(bytes[i])) * 0x100000001b3ull;
  return h ^ bytes.size();
}

ModelShape SmallTestShape() {
  return {.name = "small-test",
          .num_layers = 2,
          .hidden_dim = 64,
          .ffn_dim = 128,
          .num_heads = 4,
          .num_kv_heads = 2,
          .vocab_size = 300,
          .context_length = 128,
          .rope_freq_base = 10000.0f,
          .rms_norm_eps = 1e-5f,
          .tied_output = false};
}

// Runs one forward of `tokens` (one sequence from position 0) and returns
// the last position's logits.
std::vector<float> ForwardLogits(Model& model, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model.config();
  kv::KvStorageConfig sc;
  sc.num_layers = c.num_layers;
  sc.num_blocks = 4;
  sc.block_size = 16;
  sc.num_kv_heads = c.num_kv_heads;
  sc.head_dim = c.head_dim;
  sc.dtype = model.kv_dtype();
  auto storage = kv::KvStorage::Create(sc);
  EXPECT_TRUE(storage.ok()) << storage.status();
  if (!storage.ok()) return {};
  const std::vector<BlockId> table = {BlockId(0), BlockId(1)};
  ForwardSequence seq;
  seq.tokens = tokens;
  seq.start_pos = 0;
  seq.block_table = table;
  seq.num_logits = 1;
  std::vector<float> logits(c.vocab_size);
  absl::Status s = model.Forward(std::span<const ForwardSequence>(&seq, 1), **storage,
                                 logits.data());
  EXPECT_TRUE(s.ok()) << s;
  return logits;
}

void ExpectFiniteAndVaried(const std::vector<float>& logits) {
  ASSERT_FALSE(logits.empty());
  float lo = logits[0], hi = logits[0];
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1e-3f) << "random weights should give varied logits";
}

TEST(ModelShapesTest, KnownShapesHavePublishedValues) {
  absl::StatusOr<ModelShape> llama3 = FindModelShape("llama3-8b");
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ(llama3->num_layers, 32);
  EXPECT_EQ(llama3->hidden_dim, 4096);
  EXPECT_EQ(llama3->ffn_dim, 14336);
  EXPECT_EQ(llama3->num_heads, 32);
  EXPECT_EQ(llama3->num_kv_heads, 8);
  EXPECT_EQ(llama3->vocab_size, 128256);
  EXPECT_EQ(llama3->context_length, 8192);
  EXPECT_EQ(llama3->rope_freq_base, 500000.0f);
  EXPECT_FALSE(llama3->tied_output);

  absl::StatusOr<ModelShape> llama2 = FindModelShape("llama2-7b");
  ASSERT_TRUE(llama2.ok());
  EXPECT_EQ(llama2->ffn_dim, 11008);
  EXPECT_EQ(llama2->num_kv_heads, 32);
  EXPECT_EQ(llama2->vocab_size, 32000);
  EXPECT_EQ(llama2->context_length, 4096);

  absl::StatusOr<ModelShape> smol = FindModelShape("smollm2-135m");
  ASSERT_TRUE(smol.ok());
  EXPECT_EQ(smol->num_layers, 30);
  EXPECT_EQ(smol->hidden_dim, 576);
  EXPECT_EQ(smol->num_kv_heads, 3);
  EXPECT_EQ(smol->vocab_size, 49152);
  EXPECT_EQ(smol->rope_freq_base, 100000.0f);
  EXPECT_TRUE(smol->tied_output);
}

TEST(ModelShapesTest, UnknownShapeListsKnownOnes) {
  absl::StatusOr<ModelShape> shape = FindModelShape("llama4-1t");
  ASSERT_EQ(shape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shape.status().message().find("llama4-1t"), std::string::npos);
  for (const char* known : {"llama3-8b", "llama2-7b", "smollm2-135m", "toy", "tiny", "toy-head"}) {
    EXPECT_NE(shape.status().message().find(known), std::string::npos) << known;
  }
}

TEST(ModelGeneratorTest, ParsesDtypes) {
  EXPECT_EQ(*ParseGeneratorDtype("bf16"), GgmlType::kBF16);
  EXPECT_EQ(*ParseGeneratorDtype("Q8_0"), GgmlType::kQ8_0);
  absl::StatusOr<GgmlType> bad = ParseGeneratorDtype("q4_k");
  ASSERT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("q4_k"), std::string::npos);
}

TEST(ModelGeneratorTest, RejectsBadDtypeShapeAndDirectory) {
  TempDir dir;
  const std::string out = dir.File("m.gguf");
  EXPECT_EQ(GenerateModel(SmallTestShape(), GgmlType::kQ4_0, 1, out, nullptr).code(),
            StatusCode::kInvalidArgument);
  ModelShape bad_heads = SmallTestShape();
  bad_heads.num_heads = 5;
  absl::Status s = GenerateModel(bad_heads, GgmlType::kBF16, 1, out, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_heads 5"), std::string::npos) << s;
  ModelShape bad_width = SmallTestShape();
  bad_width.ffn_dim = 100;  // fine for bf16, not a multiple of the Q8_0 block
  EXPECT_EQ(GenerateModel(bad_width, GgmlType::kQ8_0, 1, out, nullptr).code(),
            StatusCode::kInvalidArgument);
  ModelShape small_vocab = SmallTestShape();
  small_vocab.vocab_size = 100;  // below the 259 fixed tokens
  EXPECT_EQ(GenerateModel(small_vocab, GgmlType::kBF16, 1, out, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(out));
  s = GenerateModel(SmallTestShape(), GgmlType::kBF16, 1, dir.File("missing/m.gguf"), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
}

// The streaming path writes exactly what Serialize() builds in memory, for
// tensors of sizes that need padding, mixed with in-memory tensors.
TEST(ModelGeneratorTest, StreamingWriterMatchesSerialize) {
  struct Spec {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
  };
  const std::vector<Spec> specs = {
      {"a", GgmlType::kF32, {3}},           // 12 bytes: padded
      {"b", GgmlType::kBF16, {5, 7}},       // 70 bytes: padded
      {"c", GgmlType::kQ8_0, {64, 3}},      // 204 bytes
      {"d", GgmlType::kF32, {8}},           // 32 bytes: aligned
  };
  auto bytes_of = [&](size_t i) {
    const auto& t = gguf::TypeTraits(specs[i].type);
    int64_t n = 1;
    for (int64_t d : specs[i].dims) n *= d;
    std::string b(n / t.block_size * t.type_size, '\0');
    for (size_t j = 0; j < b.size(); ++j) b[j] = static_cast<char>(i * 31 + j * 7 + 1);
    return b;
  };
  for (uint32_t alignment : {32u, 64u}) {
    gguf::GgufWriter in_memory, streamed;
    for (gguf::GgufWriter* w : {&in_memory, &streamed}) {
      w->AddString("general.architecture", "test");
      w->AddUint32("general.alignment", alignment);
      w->AddStringArray("k.strings", {"x", "yz"});
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      ASSERT_TRUE(in_memory.AddTensor(specs[i].name, specs[i].type, specs[i].dims, bytes_of(i))
                      .ok());
      // Tensor "c" is given in memory to the streaming writer too.
      ASSERT_TRUE((i == 2 ? streamed.AddTensor(specs[i].name, specs[i].type, specs[i].dims,
                                               bytes_of(i))
                          : streamed.AddTensorInfo(specs[i].name, specs[i].type, specs[i].dims))
                      .ok());
    }
    TempDir dir;
    const std::string path = dir.File("s.gguf");
    std::vector<size_t> asked;
    absl::Status s = streamed.WriteStreaming(path, [&](size_t i) -> absl::StatusOr<std::string> {
      asked.push_back(i);
      return bytes_of(i);
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(asked, (std::vector<size_t>{0, 1, 3}));
    const std::string expected = in_memory.Serialize();
    EXPECT_EQ(ReadAll(path), expected) << "alignment " << alignment;
    EXPECT_EQ(streamed.FileSize(), expected.size());
    EXPECT_EQ(in_memory.FileSize(), expected.size());
    EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
    EXPECT_TRUE(gguf::GgufFile::Open(path).ok());
  }
}

TEST(ModelGeneratorTest, StreamingWriterFailuresLeaveNoFile) {
  gguf::GgufWriter w;
  ASSERT_TRUE(w.AddTensorInfo("t", GgmlType::kF32, {4}).ok());
  EXPECT_EQ(w.AddTensorInfo("t", GgmlType::kF32, {4}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensorInfo("u", GgmlType::kQ8_0, {30}).code(), StatusCode::kInvalidArgument);
  TempDir dir;
  const std::string path = dir.File("f.gguf");
  absl::Status s = w.WriteStreaming(path, [](size_t) -> absl::StatusOr<std::string> {
    return std::string(15, 'x');  // 16 expected
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("16"), std::string::npos) << s;
  s = w.WriteStreaming(path, [](size_t) -> absl::StatusOr<std::string> {
    return absl::DataLossError("producer broke");
  });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

// Same seed, same bytes; another seed, other bytes. Both dtypes load and run.
TEST(ModelGeneratorTest, SmallTestShapeIsReproducibleAndRuns) {
  TempDir dir;
  for (GgmlType dtype : {GgmlType::kBF16, GgmlType::kQ8_0}) {
    const std::string a = dir.File("a.gguf"), b = dir.File("b.gguf"), c = dir.File("c.gguf");
    ASSERT_TRUE(GenerateModel(SmallTestShape(), dtype, 7, a, nullptr).ok());
    ASSERT_TRUE(GenerateModel(SmallTestShape(), dtype, 7, b, nullptr).ok());
    ASSERT_TRUE(GenerateModel(SmallTestShape(), dtype, 8, c, nullptr).ok());
    EXPECT_EQ(HashFile(a), HashFile(b));
    EXPECT_NE(HashFile(a), HashFile(c));
    for (Precision precision : {Precision::kFast, Precision::kReference}) {
      ModelOptions options;
      options.precision = precision;
      options.num_threads = 2;
      absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(a, options);
      ASSERT_TRUE(model.ok()) << model.status();
      EXPECT_EQ((*model)->config().vocab_size, 300);
      ExpectFiniteAndVaried(ForwardLogits(**model, {256, 72, 101, 108, 108, 111}));
    }
  }
}

// The real-size model: ~150 MB of Q8_0 that loads, runs and tokenizes.
class SmolLmGeneratorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    absl::StatusOr<ModelShape> shape = FindModelShape("smollm2-135m");
    CHECK(shape.ok());
    int32_t last_reported = 0;
    absl::Status s = GenerateModel(*shape, GgmlType::kQ8_0, 42, dir_->File("smol.gguf"),
                                   nullptr, [&](int32_t done, int32_t total) {
                                     CHECK(done == last_reported + 1 && total == 30);
                                     last_reported = done;
                                   });
    CHECK(s.ok(), "%s", s.ToString());
    CHECK(last_reported == 30);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Path() { return dir_->File("smol.gguf"); }

  static inline TempDir* dir_ = nullptr;
};

TEST_F(SmolLmGeneratorTest, HasLlamaMetadataAndEveryTensor) {
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(Path());
  ASSERT_TRUE(file.ok()) << file.status();
  const gguf::GgufFile& f = **file;
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetString("general.name"), "tandem random smollm2-135m");
  EXPECT_EQ(*f.GetInt("llama.block_count"), 30);
  EXPECT_EQ(*f.GetInt("llama.context_length"), 8192);
  EXPECT_EQ(*f.GetInt("llama.embedding_length"), 576);
  EXPECT_EQ(*f.GetInt("llama.feed_forward_length"), 1536);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count"), 9);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(*f.GetInt("llama.rope.dimension_count"), 64);
  EXPECT_EQ(*f.GetInt("llama.vocab_size"), 49152);
  EXPECT_EQ(*f.GetInt("general.file_type"), 7);
  EXPECT_FLOAT_EQ(*f.GetFloat("llama.rope.freq_base"), 100000.0);
  EXPECT_FLOAT_EQ(*f.GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5);

  // 1 embedding + 9 per layer + output norm; tied, so no output.weight.
  EXPECT_EQ(f.tensors().size(), 1u + 30u * 9u + 1u);
  EXPECT_EQ(f.FindTensor("output.weight"), nullptr);
  auto expect = [&](const std::string& name, GgmlType type, std::vector<int64_t> dims) {
    const gguf::TensorInfo* t = f.FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, type) << name;
    EXPECT_EQ(t->dims, dims) << name;
  };
  expect("token_embd.weight", GgmlType::kQ8_0, {576, 49152});
  expect("output_norm.weight", GgmlType::kF32, {576});
  for (int l = 0; l < 30; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    expect(p + "attn_norm.weight", GgmlType::kF32, {576});
    expect(p + "attn_q.weight", GgmlType::kQ8_0, {576, 576});
    expect(p + "attn_k.weight", GgmlType::kQ8_0, {576, 192});
    expect(p + "attn_v.weight", GgmlType::kQ8_0, {576, 192});
    expect(p + "attn_output.weight", GgmlType::kQ8_0, {576, 576});
    expect(p + "ffn_norm.weight", GgmlType::kF32, {576});
    expect(p + "ffn_gate.weight", GgmlType::kQ8_0, {576, 1536});
    expect(p + "ffn_up.weight", GgmlType::kQ8_0, {576, 1536});
    expect(p + "ffn_down.weight", GgmlType::kQ8_0, {1536, 576});
  }
  const gguf::TensorInfo* norm = f.FindTensor("blk.7.ffn_norm.weight");
  ASSERT_NE(norm, nullptr);
  for (int i = 0; i < 576; ++i) {
    float v;
    std::memcpy(&v, norm->data + 4 * i, 4);
    ASSERT_EQ(v, 1.0f) << i;
  }
  // Weights are N(0, 0.02): check the spread of one matrix's first row.
  const gguf::TensorInfo* q = f.FindTensor("blk.0.attn_q.weight");
  std::vector<float> row(576);
  ASSERT_TRUE(gguf::DequantizeRow(q->type, q->data, 576, row.data()).ok());
  double sum_sq = 0;
  for (float v : row) sum_sq += v * v;
  EXPECT_NEAR(std::sqrt(sum_sq / 576), kGeneratedWeightStd, 0.003);
}

TEST_F(SmolLmGeneratorTest, LoadsAndRunsForward) {
  ModelOptions options;
  options.num_threads = 2;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(Path(), options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().num_layers, 30);
  ExpectFiniteAndVaried(ForwardLogits(**model, {256, 1000, 20000, 49151, 5, 300, 7}));
}

TEST_F(SmolLmGeneratorTest, SyntheticVocabularyTokenizes) {
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(Path());
  ASSERT_TRUE(file.ok());
  absl::StatusOr<tokenizer::Vocab> vocab = tokenizer::LoadVocabFromGguf(**file);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->size(), 49152);
  EXPECT_EQ(vocab->pre, "gpt2");
  EXPECT_EQ(vocab->tokens[256], "<|endoftext|>");
  EXPECT_EQ(vocab->eos_id, 256);
  const std::string chat_template = vocab->chat_template;
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok =
      tokenizer::Tokenizer::Create(*std::move(vocab));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text = "Hello world, the quick brown fox. 12345 \xc3\xa9\n<|im_end|>";
  std::vector<int32_t> ids = (*tok)->Encode(text, /*add_special=*/true, /*parse_special=*/true);
  // Merges make multi-byte tokens: far fewer ids than bytes.
  EXPECT_LT(ids.size(), text.size() * 2 / 3) << ids.size();
  EXPECT_EQ(ids.back(), *(*tok)->TokenId("<|im_end|>"));
  EXPECT_TRUE((*tok)->IsEndOfGeneration(ids.back()));
  absl::StatusOr<std::string> decoded = (*tok)->Decode(ids, /*skip_special=*/false);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, text);
  // Merges build " th" (' ' + 't', then + 'h'); the 4-character " the" is
  // beyond the 3-character filler tokens, so it takes two.
  EXPECT_EQ((*tok)->Encode(" th", false, false),
            std::vector<int32_t>{*(*tok)->TokenId("\xc4\xa0th")});
  EXPECT_EQ((*tok)->Encode(" the", false, false).size(), 2u);

  std::vector<tokenizer::ChatMessage> messages = {{"user", "hi"}};
  absl::StatusOr<std::string> prompt =
      tokenizer::ApplyChatTemplate(messages, /*add_generation_prompt=*/true, chat_template);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ModelGeneratorVocabTest, CopiesVocabularyOfMatchingSize) {
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> source =
      gguf::GgufFile::Open(testing::DefaultModelPath());
  ASSERT_TRUE(source.ok()) << source.status();
  TempDir dir;
  const std::string path = dir.File("copied.gguf");
  absl::StatusOr<ModelShape> shape = FindModelShape("smollm2-135m");
  ASSERT_TRUE(shape.ok());
  // Fewer layers keep the test fast; the vocabulary is what is checked.
  shape->num_layers = 2;
  absl::Status s = GenerateModel(*shape, GgmlType::kQ8_0, 1, path, source->get());
  ASSERT_TRUE(s.ok()) << s;
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> made = gguf::GgufFile::Open(path);
  ASSERT_TRUE(made.ok()) << made.status();
  int copied = 0;
  for (const auto& [key, value] : (*source)->metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    const gguf::MetadataValue* v = (*made)->FindMetadata(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_TRUE(*v == value) << key;
    ++copied;
  }
  EXPECT_GE(copied, 5);
  absl::StatusOr<tokenizer::Vocab> a = tokenizer::LoadVocabFromGguf(**source);
  absl::StatusOr<tokenizer::Vocab> b = tokenizer::LoadVocabFromGguf(**made);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->merges, b->merges);
  EXPECT_EQ(a->pre, "smollm");
  EXPECT_EQ(b->pre, "smollm");
  ModelOptions options;
  options.num_threads = 2;
  EXPECT_TRUE(Model::Load(path, options).ok());

  // A source of another vocabulary size is ignored: synthetic tokens instead.
  const std::string tiny = dir.File("tiny.gguf");
  ASSERT_TRUE(GenerateModel(SmallTestShape(), GgmlType::kBF16, 1, tiny, source->get()).ok());
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> tiny_file = gguf::GgufFile::Open(tiny);
  ASSERT_TRUE(tiny_file.ok());
  absl::StatusOr<tokenizer::Vocab> tv = tokenizer::LoadVocabFromGguf(**tiny_file);
  ASSERT_TRUE(tv.ok()) << tv.status();
  EXPECT_EQ(tv->size(), 300);
  EXPECT_EQ(tv->pre, "gpt2");
}

}  // namespace
}  // namespace tandem::model
