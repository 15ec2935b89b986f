// GgufWriter -> GgufFile round trips, the typed getters, and reading a file
// written by an independent writer (llama.cpp's gguf-py).
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "gtest/gtest.h"

namespace tandem::gguf {
namespace {

using ::absl::StatusCode;

std::string Bytes(size_t n, uint8_t seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(seed + i * 7);
  return out;
}

std::unique_ptr<GgufFile> OpenBuffer(std::string bytes) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer(std::move(bytes));
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : nullptr;
}

std::vector<std::pair<std::string, MetadataValue>> EveryMetadataType() {
  return {
      {"k.u8", MetadataValue::Uint8(250)},
      {"k.i8", MetadataValue::Int8(-120)},
      {"k.u16", MetadataValue::Uint16(65000)},
      {"k.i16", MetadataValue::Int16(-32000)},
      {"k.u32", MetadataValue::Uint32(4000000000u)},
      {"k.i32", MetadataValue::Int32(-2000000000)},
      {"k.f32", MetadataValue::Float32(1.5f)},
      {"k.bool", MetadataValue::Bool(true)},
      {"k.string", MetadataValue::String("tandem \xe2\x96\x81 gguf")},
      {"k.u64", MetadataValue::Uint64(~uint64_t{0})},
      {"k.i64", MetadataValue::Int64(std::numeric_limits<int64_t>::min())},
      {"k.f64", MetadataValue::Float64(-1e-300)},
      {"k.empty_array", MetadataValue::MakeArray(MetadataType::kFloat64, {})},
      {"k.u8s", MetadataValue::MakeArray(MetadataType::kUint8,
                                         {MetadataValue::Uint8(1), MetadataValue::Uint8(255)})},
      {"k.u64s", MetadataValue::MakeArray(MetadataType::kUint64, {MetadataValue::Uint64(7)})},
      {"k.bools", MetadataValue::MakeArray(MetadataType::kBool,
                                           {MetadataValue::Bool(false), MetadataValue::Bool(true)})},
      {"k.f64s", MetadataValue::MakeArray(MetadataType::kFloat64, {MetadataValue::Float64(0.25)})},
      {"k.nested",
       MetadataValue::MakeArray(
           MetadataType::kArray,
           {MetadataValue::MakeArray(MetadataType::kString, {MetadataValue::String("a")}),
            MetadataValue::MakeArray(MetadataType::kInt8, {MetadataValue::Int8(-1)})})},
  };
}

TEST(GgufRoundTripTest, EveryMetadataTypeSurvives) {
  GgufWriter writer;
  for (const auto& [key, value] : EveryMetadataType()) writer.Add(key, value);
  writer.AddStringArray("k.strings", {"x", "", "yz"});
  writer.AddInt32Array("k.i32s", {-1, 0, 2147483647});
  writer.AddFloat32Array("k.f32s", {0.5f, -2.0f});
  writer.AddUint32("k.u32", 17);  // replaces the earlier value, keeps its position
  std::unique_ptr<GgufFile> file = OpenBuffer(writer.Serialize());
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_TRUE(file->tensors().empty());

  auto expected = EveryMetadataType();
  expected[4].second = MetadataValue::Uint32(17);
  ASSERT_EQ(file->metadata().size(), expected.size() + 3);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(file->metadata()[i].first, expected[i].first);
    EXPECT_EQ(file->metadata()[i].second, expected[i].second) << expected[i].first;
    EXPECT_EQ(file->FindMetadata(expected[i].first), &file->metadata()[i].second);
  }
  EXPECT_EQ(file->FindMetadata("k.missing"), nullptr);

  EXPECT_EQ(*file->GetInt("k.u8"), 250);
  EXPECT_EQ(*file->GetInt("k.i8"), -120);
  EXPECT_EQ(*file->GetInt("k.u16"), 65000);
  EXPECT_EQ(*file->GetInt("k.i16"), -32000);
  EXPECT_EQ(*file->GetInt("k.u32"), 17);
  EXPECT_EQ(*file->GetInt("k.i32"), -2000000000);
  EXPECT_EQ(*file->GetInt("k.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*file->GetFloat("k.f32"), 1.5);
  EXPECT_EQ(*file->GetFloat("k.f64"), -1e-300);
  EXPECT_EQ(*file->GetBool("k.bool"), true);
  EXPECT_EQ(*file->GetString("k.string"), "tandem \xe2\x96\x81 gguf");
  EXPECT_EQ(*file->GetStringArray("k.strings"), (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_EQ(*file->GetIntArray("k.i32s"), (std::vector<int64_t>{-1, 0, 2147483647}));
  EXPECT_EQ(*file->GetIntArray("k.u8s"), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(*file->GetFloatArray("k.f32s"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(*file->GetFloatArray("k.f64s"), (std::vector<float>{0.25f}));
  EXPECT_TRUE(file->GetFloatArray("k.empty_array")->empty());
  ASSERT_TRUE(file->GetArray("k.nested", MetadataType::kArray).ok());
  EXPECT_EQ((*file->GetArray("k.nested", MetadataType::kArray))->elements.size(), 2u);

  EXPECT_EQ(*file->GetIntOr("k.missing", 42), 42);
  EXPECT_EQ(*file->GetIntOr("k.i8", 42), -120);
  EXPECT_EQ(*file->GetFloatOr("k.missing", 0.5), 0.5);
  EXPECT_EQ(*file->GetBoolOr("k.missing", true), true);
  EXPECT_EQ(*file->GetStringOr("k.missing", "dflt"), "dflt");
  EXPECT_EQ(*file->GetStringOr("k.string", "dflt"), "tandem \xe2\x96\x81 gguf");
}

void ExpectError(const absl::Status& status, StatusCode code, const std::string& fragment) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_NE(std::string(status.message()).find(fragment), std::string::npos)
      << "'" << fragment << "' not in: " << status;
}

TEST(GgufRoundTripTest, GettersNameKeyAndTypes) {
  GgufWriter writer;
  for (const auto& [key, value] : EveryMetadataType()) writer.Add(key, value);
  std::unique_ptr<GgufFile> file = OpenBuffer(writer.Serialize());
  ASSERT_NE(file, nullptr);
  ExpectError(file->GetInt("nope").status(), StatusCode::kNotFound, "metadata key 'nope' not found");
  ExpectError(file->GetInt("k.string").status(), StatusCode::kInvalidArgument,
              "'k.string' in '<buffer>' has type string");
  ExpectError(file->GetInt("k.u64").status(), StatusCode::kOutOfRange,
              "is 18446744073709551615, above the int64 maximum 9223372036854775807");
  ExpectError(file->GetFloat("k.i32").status(), StatusCode::kInvalidArgument,
              "has type int32 (value -2000000000), expected float32 or float64");
  ExpectError(file->GetBool("k.u8").status(), StatusCode::kInvalidArgument, "expected bool");
  ExpectError(file->GetString("k.f32").status(), StatusCode::kInvalidArgument, "expected string");
  ExpectError(file->GetStringArray("k.u8s").status(), StatusCode::kInvalidArgument,
              "has type array of uint8 (value [1, 255]), expected array of string");
  ExpectError(file->GetIntArray("k.f64s").status(), StatusCode::kInvalidArgument,
              "expected array of an integer type");
  ExpectError(file->GetIntArray("k.u64s").status(), StatusCode::kOk, "");
  ExpectError(file->GetFloatArray("k.bools").status(), StatusCode::kInvalidArgument,
              "array of bool");
  ExpectError(file->GetIntOr("k.f32", 1).status(), StatusCode::kInvalidArgument, "'k.f32'");
  ExpectError(file->GetStringOr("k.i8", "").status(), StatusCode::kInvalidArgument, "'k.i8'");
}

TEST(GgufRoundTripTest, IntArrayRejectsHugeUint64Element) {
  GgufWriter writer;
  writer.Add("big", MetadataValue::MakeArray(MetadataType::kUint64,
                                             {MetadataValue::Uint64(1), MetadataValue::Uint64(~0ull)}));
  std::unique_ptr<GgufFile> file = OpenBuffer(writer.Serialize());
  ASSERT_NE(file, nullptr);
  ExpectError(file->GetIntArray("big").status(), StatusCode::kOutOfRange, "element 1 is 18446744073709551615");
}

struct TensorSpec {
  std::string name;
  GgmlType type;
  std::vector<int64_t> dims;
};

TEST(GgufRoundTripTest, TensorsOfEveryTypeSurvive) {
  const std::vector<TensorSpec> specs = {
      {"f32", GgmlType::kF32, {3, 2}},        {"f16", GgmlType::kF16, {5}},
      {"bf16", GgmlType::kBF16, {2, 2, 2}},   {"q4_0", GgmlType::kQ4_0, {64, 3}},
      {"q4_1", GgmlType::kQ4_1, {32}},        {"q5_0", GgmlType::kQ5_0, {32, 1, 2}},
      {"q5_1", GgmlType::kQ5_1, {32}},        {"q8_0", GgmlType::kQ8_0, {96, 2}},
      {"q8_1", GgmlType::kQ8_1, {32}},        {"q2_k", GgmlType::kQ2_K, {256}},
      {"q3_k", GgmlType::kQ3_K, {256}},       {"q4_k", GgmlType::kQ4_K, {512, 2}},
      {"q5_k", GgmlType::kQ5_K, {256}},       {"q6_k", GgmlType::kQ6_K, {256, 1, 1, 2}},
      {"q8_k", GgmlType::kQ8_K, {256}},       {"i8", GgmlType::kI8, {7}},
      {"i16", GgmlType::kI16, {3}},           {"i32", GgmlType::kI32, {1}},
      {"i64", GgmlType::kI64, {2}},           {"f64", GgmlType::kF64, {1, 1}},
  };
  GgufWriter writer;
  writer.AddString("general.architecture", "test");
  std::vector<std::string> payloads;
  for (size_t i = 0; i < specs.size(); ++i) {
    const GgmlTypeTraits& traits = TypeTraits(specs[i].type);
    int64_t elements = 1;
    for (int64_t d : specs[i].dims) elements *= d;
    payloads.push_back(Bytes(elements / traits.block_size * traits.type_size, i));
    ASSERT_TRUE(writer.AddTensor(specs[i].name, specs[i].type, specs[i].dims, payloads[i]).ok());
  }
  std::unique_ptr<GgufFile> file = OpenBuffer(writer.Serialize());
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(file->tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(specs[i].name);
    const TensorInfo& t = file->tensors()[i];
    EXPECT_EQ(file->FindTensor(specs[i].name), &t);
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(t.type, specs[i].type);
    EXPECT_EQ(t.dims, specs[i].dims);
    EXPECT_EQ(t.num_bytes, payloads[i].size());
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(t.cols(), specs[i].dims[0]);
    EXPECT_EQ(t.rows() * t.cols(), t.num_elements);
    EXPECT_EQ(t.row_bytes() * t.rows(), static_cast<int64_t>(t.num_bytes));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data), t.num_bytes), payloads[i]);
  }
  EXPECT_EQ(file->FindTensor("absent"), nullptr);
  const TensorInfo* q6 = file->FindTensor("q6_k");
  EXPECT_EQ(q6->rows(), 2);
  EXPECT_EQ(q6->row_bytes(), 210);
}

TEST(GgufRoundTripTest, CustomAlignmentIsHonoured) {
  GgufWriter writer;
  writer.AddUint32("general.alignment", 256);
  ASSERT_TRUE(writer.AddTensor("a", GgmlType::kF32, {3}, Bytes(12, 1)).ok());
  ASSERT_TRUE(writer.AddTensor("b", GgmlType::kF16, {5}, Bytes(10, 2)).ok());
  EXPECT_EQ(writer.alignment(), 256u);
  std::string bytes = writer.Serialize();
  EXPECT_EQ(bytes.size() % 256, 0u);
  std::unique_ptr<GgufFile> file = OpenBuffer(bytes);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->alignment(), 256u);
  EXPECT_EQ(file->data_offset() % 256, 0u);
  EXPECT_EQ(file->FindTensor("b")->offset, 256u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(file->FindTensor("b")->data), 10),
            Bytes(10, 2));
}

TEST(GgufRoundTripTest, WriterValidatesTensors) {
  GgufWriter writer;
  ExpectError(writer.AddTensor("t", GgmlType::kF32, {4}, Bytes(15, 0)), StatusCode::kInvalidArgument,
              "tensor 't' (F32, dims {4}) needs 16 bytes but was given 15");
  ExpectError(writer.AddTensor("t", GgmlType::kQ8_0, {16}, Bytes(17, 0)),
              StatusCode::kInvalidArgument, "16 columns, not a multiple of the Q8_0 block size 32");
  ExpectError(writer.AddTensor("t", GgmlType::kF32, {}, ""), StatusCode::kInvalidArgument,
              "0 dims");
  ExpectError(writer.AddTensor("t", GgmlType::kF32, {1, 1, 1, 1, 1}, Bytes(4, 0)),
              StatusCode::kInvalidArgument, "5 dims");
  ExpectError(writer.AddTensor("t", GgmlType::kF32, {2, 0}, ""), StatusCode::kInvalidArgument,
              "dim 0 < 1");
  ExpectError(writer.AddTensor("t", static_cast<GgmlType>(4), {2}, ""),
              StatusCode::kInvalidArgument, "unknown ggml type 4");
  ASSERT_TRUE(writer.AddTensor("t", GgmlType::kF32, {1}, Bytes(4, 0)).ok());
  ExpectError(writer.AddTensor("t", GgmlType::kF32, {1}, Bytes(4, 0)),
              StatusCode::kInvalidArgument, "tensor 't' was already added");
}

TEST(GgufRoundTripTest, OpenMapsTheWrittenFile) {
  GgufWriter writer;
  writer.AddString("general.name", "mapped");
  ASSERT_TRUE(writer.AddTensor("w", GgmlType::kF32, {8}, Bytes(32, 3)).ok());
  const std::string path = ::testing::TempDir() + "/gguf_roundtrip_" +
                           std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(writer.WriteFile(path).ok());
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->source(), path);
  EXPECT_EQ((*file)->file_size(), writer.Serialize().size());
  EXPECT_EQ(*(*file)->GetString("general.name"), "mapped");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*file)->FindTensor("w")->data), 32),
            Bytes(32, 3));
  std::remove(path.c_str());

  ExpectError(GgufFile::Open(path).status(), StatusCode::kNotFound, path);
  ExpectError(GgufFile::Open(::testing::TempDir()).status(), StatusCode::kInvalidArgument,
              "is not a regular file");
  ExpectError(writer.WriteFile("/nonexistent-dir/x.gguf"), StatusCode::kUnavailable,
              "/nonexistent-dir/x.gguf");
  // An empty file is not a GGUF file.
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  ExpectError(GgufFile::Open(path).status(), StatusCode::kInvalidArgument,
              "not a GGUF file: '" + path + "' is 0 bytes");
  std::remove(path.c_str());
}

TEST(GgufRoundTripTest, ReadsFileFromIndependentWriter) {
  const std::string path = TANDEM_SOURCE_DIR "/tests/reference/gguf/quant_fixture.gguf";
  absl::StatusOr<std::unique_ptr<GgufFile>> opened = GgufFile::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(*file.GetString("general.architecture"), "fixture");
  EXPECT_EQ(file.FindMetadata("fixture.u8")->type(), MetadataType::kUint8);
  EXPECT_EQ(*file.GetInt("fixture.u8"), 200);
  EXPECT_EQ(*file.GetInt("fixture.i8"), -100);
  EXPECT_EQ(*file.GetInt("fixture.u16"), 60000);
  EXPECT_EQ(*file.GetInt("fixture.i16"), -30000);
  EXPECT_EQ(*file.GetInt("fixture.u32"), 4000000000);
  EXPECT_EQ(*file.GetInt("fixture.i32"), -2000000000);
  EXPECT_EQ(*file.GetFloat("fixture.f32"), 0.15625);
  EXPECT_EQ(*file.FindMetadata("fixture.u64")->GetIf<uint64_t>(), ~uint64_t{0});
  EXPECT_EQ(*file.GetInt("fixture.i64"), -9000000000000000000);
  EXPECT_EQ(*file.GetFloat("fixture.f64"), 2.718281828459045);
  EXPECT_EQ(*file.GetBool("fixture.bool"), true);
  EXPECT_EQ(*file.GetString("fixture.string"), "h\xc3\xa9llo \xe2\x96\x81world");
  EXPECT_EQ(*file.GetStringArray("fixture.strings"),
            (std::vector<std::string>{"a", "bc", "", "\xc4\xa0" "def"}));
  EXPECT_EQ(*file.GetIntArray("fixture.u16s"), (std::vector<int64_t>{1, 2, 65535}));
  EXPECT_EQ(*file.GetFloatArray("fixture.f32s"), (std::vector<float>{0.5f, -1.25f, 3.0f}));
  absl::StatusOr<const MetadataValue::Array*> nested =
      file.GetArray("fixture.nested", MetadataType::kArray);
  ASSERT_TRUE(nested.ok()) << nested.status();
  ASSERT_EQ((*nested)->elements.size(), 3u);
  EXPECT_EQ((*nested)->elements[2].DebugString(), "[4, 5, 6]");
  EXPECT_EQ(file.tensors().size(), 11u);
  EXPECT_EQ(file.FindTensor("q4_k.raw")->type, GgmlType::kQ4_K);
  EXPECT_EQ(file.FindTensor("q4_k.raw")->dims, (std::vector<int64_t>{512}));
}

}  // namespace
}  // namespace tandem::gguf
