#include "engine/gguf/metadata_value.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::gguf {
namespace {

MetadataValue Reencode(const MetadataValue& value) {
  std::string bytes;
  value.AppendTo(&bytes);
  ByteReader reader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  absl::StatusOr<MetadataValue> read = MetadataValue::Read(&reader, value.type());
  EXPECT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(reader.remaining(), 0u);
  return read.ok() ? *read : MetadataValue();
}

TEST(MetadataValueTest, TypeTagsAreGgufCodes) {
  EXPECT_EQ(MetadataValue::Uint8(1).type(), MetadataType::kUint8);
  EXPECT_EQ(MetadataValue::Int8(1).type(), MetadataType::kInt8);
  EXPECT_EQ(MetadataValue::Uint16(1).type(), MetadataType::kUint16);
  EXPECT_EQ(MetadataValue::Int16(1).type(), MetadataType::kInt16);
  EXPECT_EQ(MetadataValue::Uint32(1).type(), MetadataType::kUint32);
  EXPECT_EQ(MetadataValue::Int32(1).type(), MetadataType::kInt32);
  EXPECT_EQ(MetadataValue::Float32(1).type(), MetadataType::kFloat32);
  EXPECT_EQ(MetadataValue::Bool(true).type(), MetadataType::kBool);
  EXPECT_EQ(MetadataValue::String("x").type(), MetadataType::kString);
  EXPECT_EQ(MetadataValue::MakeArray(MetadataType::kBool, {}).type(), MetadataType::kArray);
  EXPECT_EQ(MetadataValue::Uint64(1).type(), MetadataType::kUint64);
  EXPECT_EQ(MetadataValue::Int64(1).type(), MetadataType::kInt64);
  EXPECT_EQ(MetadataValue::Float64(1).type(), MetadataType::kFloat64);
  EXPECT_STREQ(MetadataTypeName(MetadataType::kFloat64), "float64");
  EXPECT_STREQ(MetadataTypeName(static_cast<MetadataType>(13)), "unknown");
}

TEST(MetadataValueTest, AsIntCoversEveryIntegerTypeAndRejectsTheRest) {
  EXPECT_EQ(MetadataValue::Uint8(255).AsInt(), 255);
  EXPECT_EQ(MetadataValue::Int8(-128).AsInt(), -128);
  EXPECT_EQ(MetadataValue::Uint16(65535).AsInt(), 65535);
  EXPECT_EQ(MetadataValue::Int16(-32768).AsInt(), -32768);
  EXPECT_EQ(MetadataValue::Uint32(4294967295u).AsInt(), 4294967295);
  EXPECT_EQ(MetadataValue::Int32(-7).AsInt(), -7);
  EXPECT_EQ(MetadataValue::Int64(std::numeric_limits<int64_t>::min()).AsInt(),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(MetadataValue::Uint64(uint64_t{1} << 63).AsInt(), std::nullopt);
  EXPECT_EQ(MetadataValue::Uint64((uint64_t{1} << 63) - 1).AsInt(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(MetadataValue::Bool(true).AsInt(), std::nullopt);
  EXPECT_EQ(MetadataValue::Float32(1.0f).AsInt(), std::nullopt);
  EXPECT_EQ(MetadataValue::String("1").AsInt(), std::nullopt);

  EXPECT_EQ(MetadataValue::Float32(0.25f).AsDouble(), 0.25);
  EXPECT_EQ(MetadataValue::Float64(1e300).AsDouble(), 1e300);
  EXPECT_EQ(MetadataValue::Int32(1).AsDouble(), std::nullopt);
  EXPECT_EQ(MetadataValue::Bool(false).AsBool(), false);
  EXPECT_EQ(MetadataValue::Uint8(1).AsBool(), std::nullopt);
  EXPECT_EQ(*MetadataValue::String("abc").AsString(), "abc");
  EXPECT_EQ(MetadataValue::Int8(1).AsString(), nullptr);
}

TEST(MetadataValueTest, EncodingRoundTripsEveryType) {
  std::vector<MetadataValue> values = {
      MetadataValue::Uint8(200),         MetadataValue::Int8(-3),
      MetadataValue::Uint16(50000),      MetadataValue::Int16(-20000),
      MetadataValue::Uint32(3000000000), MetadataValue::Int32(-1),
      MetadataValue::Float32(-0.5f),     MetadataValue::Bool(true),
      MetadataValue::Bool(false),        MetadataValue::String(std::string("a\0b", 3)),
      MetadataValue::String(""),         MetadataValue::Uint64(~uint64_t{0}),
      MetadataValue::Int64(-5),          MetadataValue::Float64(3.25),
  };
  values.push_back(MetadataValue::MakeArray(MetadataType::kString, {MetadataValue::String("x")}));
  values.push_back(MetadataValue::MakeArray(
      MetadataType::kArray,
      {MetadataValue::MakeArray(MetadataType::kInt16, {MetadataValue::Int16(1)}),
       MetadataValue::MakeArray(MetadataType::kInt16, {})}));
  for (const MetadataValue& value : values) {
    EXPECT_EQ(Reencode(value), value) << value.DebugString();
  }
  // Exact encoding of one array: element type, count, elements.
  std::string bytes;
  MetadataValue::MakeArray(MetadataType::kUint16, {MetadataValue::Uint16(0x0102)}).AppendTo(&bytes);
  EXPECT_EQ(bytes, std::string("\x02\0\0\0\x01\0\0\0\0\0\0\0\x02\x01", 14));
}

TEST(MetadataValueTest, DebugString) {
  EXPECT_EQ(MetadataValue::Uint64(~uint64_t{0}).DebugString(), "18446744073709551615");
  EXPECT_EQ(MetadataValue::Int8(-5).DebugString(), "-5");
  EXPECT_EQ(MetadataValue::Bool(true).DebugString(), "true");
  EXPECT_EQ(MetadataValue::String("a\"\n").DebugString(), "\"a\\\"\\n\"");
  EXPECT_EQ(MetadataValue::Float32(0.5f).DebugString(), "0.5");
  std::vector<MetadataValue> ints;
  for (int i = 0; i < 5; ++i) ints.push_back(MetadataValue::Int32(i));
  EXPECT_EQ(MetadataValue::MakeArray(MetadataType::kInt32, ints).DebugString(2),
            "[0, 1, ... (5 int32 elements)]");
  EXPECT_EQ(MetadataValue::String(std::string(100, 'z')).DebugString(),
            "\"" + std::string(64, 'z') + "\"... (100 bytes)");
}

TEST(MetadataValueTest, MakeArrayWithMixedTypesDies) {
  EXPECT_DEATH(MetadataValue::MakeArray(MetadataType::kInt32, {MetadataValue::Uint8(1)}),
               "array of int32 given an element of type uint8");
}

absl::Status ReadBytes(const std::string& bytes, MetadataType type) {
  ByteReader reader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return MetadataValue::Read(&reader, type).status();
}

TEST(MetadataValueTest, ReadRejectsMalformedValues) {
  absl::Status s = ReadBytes(std::string("\x02", 1), MetadataType::kBool);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("byte value 2"), std::string::npos) << s;

  s = ReadBytes(std::string("\x01\x02\x03", 3), MetadataType::kUint32);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("needs 4 bytes but only 3 remain"), std::string::npos) << s;

  // String of length 10 with 2 bytes present.
  s = ReadBytes(std::string("\x0a\0\0\0\0\0\0\0ab", 10), MetadataType::kString);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("length 10 but only 2 bytes remain"), std::string::npos) << s;

  // Array of 2^60 uint64 with nothing after.
  s = ReadBytes(std::string("\x0a\0\0\0\0\0\0\0\0\0\0\x10", 12), MetadataType::kArray);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("array length 1152921504606846976"), std::string::npos) << s;

  // Array of element type 13.
  s = ReadBytes(std::string("\x0d\0\0\0\0\0\0\0\0\0\0\0", 12), MetadataType::kArray);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is 13, not a GGUF value type"), std::string::npos) << s;
}

std::string NestedArrayBytes(int depth) {
  // depth arrays, each holding one array, the innermost holding no uint8s.
  std::string bytes;
  for (int i = 0; i < depth; ++i) {
    const bool innermost = i == depth - 1;
    bytes += innermost ? std::string("\0\0\0\0", 4) : std::string("\x09\0\0\0", 4);
    bytes += innermost ? std::string(8, '\0') : std::string("\x01\0\0\0\0\0\0\0", 8);
  }
  return bytes;
}

TEST(MetadataValueTest, NestingDepthIsLimited) {
  EXPECT_TRUE(ReadBytes(NestedArrayBytes(MetadataValue::kMaxArrayDepth), MetadataType::kArray).ok());
  absl::Status s =
      ReadBytes(NestedArrayBytes(MetadataValue::kMaxArrayDepth + 1), MetadataType::kArray);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("nested 9 deep (limit 8)"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem::gguf
