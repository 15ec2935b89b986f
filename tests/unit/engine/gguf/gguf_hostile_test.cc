// Hostile inputs: each case mutates a valid serialized file and expects a
// specific error code and a message naming the offending value. Plus every
// prefix of a valid file must fail cleanly.
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/logging.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "gtest/gtest.h"

namespace tandem::gguf {
namespace {

using ::absl::StatusCode;

#define CHECK_OK(expr)                                 \
  do {                                                 \
    const absl::Status check_status_ = (expr);         \
    CHECK(check_status_.ok(), "%s", check_status_.ToString()); \
  } while (0)

// Tensor infos are laid out: name (u64 length + bytes), n_dims u32, dims u64[],
// type u32, offset u64. Metadata: key, type u32, value.
std::string ValidFile() {
  GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  writer.AddUint32("general.alignment", 32);
  writer.AddUint32("t.u32", 7);
  writer.AddString("t.str", "hello");
  writer.AddInt32Array("t.arr", {1, 2, 3});
  writer.AddBool("t.bool", true);
  writer.AddUint32("dup.1", 1);
  writer.AddUint32("dup.2", 2);
  writer.Add("t.nested", MetadataValue::MakeArray(
                             MetadataType::kArray,
                             {MetadataValue::MakeArray(MetadataType::kUint8,
                                                       {MetadataValue::Uint8(9)})}));
  std::string f32x16(64, '\x01');
  std::string q8x64(68, '\x02');
  std::string f32x8(32, '\x03');
  CHECK_OK(writer.AddTensor("tensor.a", GgmlType::kF32, {8, 2}, f32x16));
  CHECK_OK(writer.AddTensor("tensor.b", GgmlType::kQ8_0, {32, 2}, q8x64));
  // Last tensor's 32 bytes end the file exactly: no trailing padding, so every
  // strict prefix loses data.
  CHECK_OK(writer.AddTensor("tensor.c", GgmlType::kF32, {8}, f32x8));
  return writer.Serialize();
}

// Position just after the one occurrence of the length-prefixed string `s`.
size_t After(const std::string& file, const std::string& s) {
  std::string needle(8, '\0');
  uint64_t length = s.size();
  std::memcpy(needle.data(), &length, 8);
  needle += s;
  size_t pos = file.find(needle);
  EXPECT_NE(pos, std::string::npos) << s;
  EXPECT_EQ(file.find(needle, pos + 1), std::string::npos) << s << " is not unique";
  return pos + needle.size();
}

template <typename T>
void Put(std::string* file, size_t pos, T value) {
  std::memcpy(file->data() + pos, &value, sizeof(T));
}

// Field positions of tensor `name` (with `n_dims` dims in the valid file).
size_t NDimsPos(const std::string& f, const std::string& name) { return After(f, name); }
size_t DimPos(const std::string& f, const std::string& name, int i) {
  return After(f, name) + 4 + 8 * i;
}
size_t TypePos(const std::string& f, const std::string& name, int n_dims) {
  return After(f, name) + 4 + 8 * n_dims;
}
size_t OffsetPos(const std::string& f, const std::string& name, int n_dims) {
  return TypePos(f, name, n_dims) + 4;
}
// Position of the value of metadata `key` (after its type tag).
size_t ValuePos(const std::string& f, const std::string& key) { return After(f, key) + 4; }

struct HostileCase {
  const char* name;
  std::function<void(std::string*)> mutate;
  StatusCode code;
  const char* fragment;  // must appear in the message
};

std::vector<HostileCase> Cases() {
  using F = std::string*;
  return {
      {"bad magic", [](F f) { (*f)[0] = 'X'; }, StatusCode::kInvalidArgument,
       "not a GGUF file: '<buffer>' starts with bytes 58 47 55 46"},
      {"version 1", [](F f) { Put<uint32_t>(f, 4, 1); }, StatusCode::kUnimplemented,
       "GGUF version 1, which is not supported"},
      {"version 0", [](F f) { Put<uint32_t>(f, 4, 0); }, StatusCode::kInvalidArgument,
       "unsupported GGUF version 0 (supported: 2, 3)"},
      {"version 4", [](F f) { Put<uint32_t>(f, 4, 4); }, StatusCode::kInvalidArgument,
       "unsupported GGUF version 4"},
      {"big-endian version", [](F f) { Put<uint32_t>(f, 4, 0x03000000); },
       StatusCode::kInvalidArgument, "version 50331648, which looks byte-swapped"},
      {"absurd tensor count", [](F f) { Put<uint64_t>(f, 8, uint64_t{1} << 60); },
       StatusCode::kDataLoss, "tensor count 1152921504606846976 is impossible"},
      {"absurd metadata count", [](F f) { Put<uint64_t>(f, 16, ~uint64_t{0}); },
       StatusCode::kDataLoss, "metadata count 18446744073709551615 is impossible"},
      {"key length beyond file",
       [](F f) { Put<uint64_t>(f, After(*f, "t.str") - 5 - 8, uint64_t{1} << 40); },
       StatusCode::kDataLoss, "has length 1099511627776 but only"},
      {"string length beyond file",
       [](F f) { Put<uint64_t>(f, ValuePos(*f, "t.str"), 1000000); }, StatusCode::kDataLoss,
       "metadata 't.str' in '<buffer>': string value at offset"},
      {"array length beyond file",
       [](F f) { Put<uint64_t>(f, ValuePos(*f, "t.arr") + 4, uint64_t{1} << 62); },
       StatusCode::kDataLoss, "array length 4611686018427387904"},
      {"unknown value type", [](F f) { Put<uint32_t>(f, After(*f, "t.u32"), 99); },
       StatusCode::kInvalidArgument, "metadata 't.u32' in '<buffer>': value type at offset"},
      {"unknown array element type", [](F f) { Put<uint32_t>(f, ValuePos(*f, "t.arr"), 13); },
       StatusCode::kInvalidArgument, "array element type at offset"},
      {"bool byte 7", [](F f) { (*f)[ValuePos(*f, "t.bool")] = 7; },
       StatusCode::kInvalidArgument, "has byte value 7 (expected 0 or 1)"},
      {"alignment 0", [](F f) { Put<uint32_t>(f, ValuePos(*f, "general.alignment"), 0); },
       StatusCode::kInvalidArgument, "general.alignment in '<buffer>' is 0, expected a power of two"},
      {"alignment 48", [](F f) { Put<uint32_t>(f, ValuePos(*f, "general.alignment"), 48); },
       StatusCode::kInvalidArgument, "is 48, expected a power of two in [1, 1073741824]"},
      {"alignment float",
       [](F f) { Put<uint32_t>(f, After(*f, "general.alignment"), 6); },  // float32 tag
       StatusCode::kInvalidArgument, "general.alignment in '<buffer>' has type float32"},
      {"duplicate key", [](F f) { (*f)[After(*f, "dup.2") - 1] = '1'; },
       StatusCode::kInvalidArgument, "duplicate metadata key 'dup.1'"},
      {"5 dims", [](F f) { Put<uint32_t>(f, NDimsPos(*f, "tensor.a"), 5); },
       StatusCode::kInvalidArgument, "tensor 'tensor.a' in '<buffer>' has 5 dimensions (expected 1..4)"},
      {"0 dims", [](F f) { Put<uint32_t>(f, NDimsPos(*f, "tensor.c"), 0); },
       StatusCode::kInvalidArgument, "has 0 dimensions"},
      {"zero dim", [](F f) { Put<uint64_t>(f, DimPos(*f, "tensor.a", 1), 0); },
       StatusCode::kInvalidArgument, "has dimension 1 = 0"},
      {"negative dim", [](F f) { Put<int64_t>(f, DimPos(*f, "tensor.a", 0), -32); },
       StatusCode::kInvalidArgument, "has dimension 0 = -32"},
      {"element count overflow",
       [](F f) { Put<uint64_t>(f, DimPos(*f, "tensor.a", 1), uint64_t{1} << 62); },
       StatusCode::kInvalidArgument, "dims {8, 4611686018427387904} whose element count overflows"},
      {"byte size overflow",
       [](F f) { Put<uint64_t>(f, DimPos(*f, "tensor.b", 1), (uint64_t{1} << 58) - 1); },
       StatusCode::kInvalidArgument, "byte size that overflows int64"},
      {"unknown tensor type", [](F f) { Put<uint32_t>(f, TypePos(*f, "tensor.c", 1), 4); },
       StatusCode::kInvalidArgument, "tensor 'tensor.c' in '<buffer>' has unknown ggml type 4"},
      {"cols not a block multiple", [](F f) { Put<uint64_t>(f, DimPos(*f, "tensor.b", 0), 16); },
       StatusCode::kInvalidArgument, "has 16 columns (dims {16, 2}), not a multiple of the Q8_0 "
                                     "block size 32"},
      {"type changes block size", [](F f) { Put<uint32_t>(f, TypePos(*f, "tensor.a", 2), 12); },
       StatusCode::kInvalidArgument, "has 8 columns (dims {8, 2}), not a multiple of the Q4_K"},
      {"misaligned offset",
       [](F f) { Put<uint64_t>(f, OffsetPos(*f, "tensor.c", 1), 64 + 96 + 4); },
       StatusCode::kInvalidArgument, "has offset 164, not a multiple of the alignment 32"},
      {"offset beyond file",
       [](F f) { Put<uint64_t>(f, OffsetPos(*f, "tensor.c", 1), uint64_t{1} << 40); },
       StatusCode::kDataLoss, "tensor 'tensor.c' in '<buffer>' occupies 32 bytes at offset 1099511627776 "},
      {"offset near uint64 max",
       [](F f) { Put<uint64_t>(f, OffsetPos(*f, "tensor.c", 1), ~uint64_t{31}); },
       StatusCode::kDataLoss, "occupies 32 bytes at offset 18446744073709551584 "},
      {"size beyond file", [](F f) { Put<uint64_t>(f, DimPos(*f, "tensor.c", 0), 16); },
       StatusCode::kDataLoss, "occupies 64 bytes at offset 160 of the data section but it holds only 192 "},
      {"overlapping tensors", [](F f) { Put<uint64_t>(f, OffsetPos(*f, "tensor.c", 1), 32); },
       StatusCode::kInvalidArgument, "tensors 'tensor.a' [0, 64) and 'tensor.c' [32, 64) overlap"},
      {"duplicate tensor name", [](F f) { (*f)[After(*f, "tensor.c") - 1] = 'a'; },
       StatusCode::kInvalidArgument, "duplicate tensor name 'tensor.a' (tensors #0 and #2)"},
  };
}

TEST(GgufHostileTest, ValidFileParses) {
  std::string file = ValidFile();
  absl::StatusOr<std::unique_ptr<GgufFile>> parsed = GgufFile::FromBuffer(file);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ((*parsed)->tensors().size(), 3u);
  const TensorInfo& last = (*parsed)->tensors()[2];
  EXPECT_EQ((*parsed)->data_offset() + last.offset + last.num_bytes, file.size());
  EXPECT_EQ(last.offset, 160u);
}

TEST(GgufHostileTest, EachMutationGivesItsError) {
  for (const HostileCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::string file = ValidFile();
    c.mutate(&file);
    absl::StatusOr<std::unique_ptr<GgufFile>> parsed = GgufFile::FromBuffer(file);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), c.code) << parsed.status();
    EXPECT_NE(std::string(parsed.status().message()).find(c.fragment), std::string::npos)
        << "expected '" << c.fragment << "' in: " << parsed.status();
  }
}

TEST(GgufHostileTest, MiscountedEntriesFail) {
  // (One tensor fewer can form a valid file, so it is not among them.)
  const std::pair<int, int> kCases[] = {{8, 1}, {16, -1}, {16, 1}};
  for (const auto& [field, delta] : kCases) {
    std::string file = ValidFile();
    uint64_t count;
    std::memcpy(&count, file.data() + field, 8);
    Put<uint64_t>(&file, field, count + delta);
    absl::StatusOr<std::unique_ptr<GgufFile>> parsed = GgufFile::FromBuffer(file);
    EXPECT_FALSE(parsed.ok()) << "field " << field << " delta " << delta;
  }
}

TEST(GgufHostileTest, ArrayNestingDepthIsLimited) {
  for (int depth : {MetadataValue::kMaxArrayDepth, MetadataValue::kMaxArrayDepth + 1}) {
    MetadataValue value = MetadataValue::MakeArray(MetadataType::kUint8, {});
    for (int i = 1; i < depth; ++i) {
      value = MetadataValue::MakeArray(MetadataType::kArray, {value});
    }
    GgufWriter writer;
    writer.Add("deep", value);
    absl::StatusOr<std::unique_ptr<GgufFile>> parsed = GgufFile::FromBuffer(writer.Serialize());
    if (depth <= MetadataValue::kMaxArrayDepth) {
      EXPECT_TRUE(parsed.ok()) << parsed.status();
    } else {
      ASSERT_FALSE(parsed.ok());
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(parsed.status().message().find("metadata 'deep'"), std::string::npos);
      EXPECT_NE(parsed.status().message().find("nested 9 deep (limit 8)"), std::string::npos)
          << parsed.status();
    }
  }
}

TEST(GgufHostileTest, HugeArrayOfEmptyStringsIsBoundedByFileSize) {
  // Claims 2^40 strings; the file holds 8 bytes per empty string at most.
  GgufWriter writer;
  writer.AddStringArray("s", {"", ""});
  std::string file = writer.Serialize();
  Put<uint64_t>(&file, ValuePos(file, "s") + 4, uint64_t{1} << 40);
  absl::StatusOr<std::unique_ptr<GgufFile>> parsed = GgufFile::FromBuffer(file);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(parsed.status().message().find("needs at least 8 bytes of string elements"),
            std::string::npos)
      << parsed.status();
}

TEST(GgufHostileTest, EveryPrefixFailsCleanly) {
  const std::string file = ValidFile();
  for (size_t length = 0; length < file.size(); ++length) {
    absl::StatusOr<std::unique_ptr<GgufFile>> parsed =
        GgufFile::FromBuffer(file.substr(0, length));
    ASSERT_FALSE(parsed.ok()) << "prefix of " << length << " bytes parsed";
    const StatusCode expected = length < 4 ? StatusCode::kInvalidArgument : StatusCode::kDataLoss;
    ASSERT_EQ(parsed.status().code(), expected) << length << ": " << parsed.status();
  }
  EXPECT_TRUE(GgufFile::FromBuffer(file).ok());
}

}  // namespace
}  // namespace tandem::gguf
