// Dequantization against hand-computed blocks and against gguf-py
// (tests/reference/gguf/quant_fixture.gguf); quantizers bit-exact against
// gguf-py's ports of ggml's reference quantizers.
#include "engine/gguf/dequantize.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "engine/gguf/gguf_file.h"
#include "gtest/gtest.h"

namespace tandem::gguf {
namespace {

std::vector<float> Dequantize(GgmlType type, const void* src, int64_t n) {
  std::vector<float> out(n, -12345.0f);
  absl::Status status = DequantizeRow(type, src, n, out.data());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

TEST(DequantizeTest, F32IsACopy) {
  const float in[3] = {1.0f, -0.0f, 3.5e-40f};
  std::vector<float> out = Dequantize(GgmlType::kF32, in, 3);
  EXPECT_EQ(std::memcmp(out.data(), in, sizeof(in)), 0);
}

TEST(DequantizeTest, F16HandValues) {
  const uint16_t in[] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x3555, 0x8000, 0x7c00, 0x0400};
  const float expected[] = {1.0f, -2.0f, 5.9604644775390625e-08f, 65504.0f,
                            0.333251953125f, -0.0f, INFINITY, 6.103515625e-05f};
  std::vector<float> out = Dequantize(GgmlType::kF16, in, 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[i], expected[i]) << i;
    EXPECT_EQ(std::signbit(out[i]), std::signbit(expected[i])) << i;
  }
  uint16_t nan_bits = 0x7e00;
  EXPECT_TRUE(std::isnan(Dequantize(GgmlType::kF16, &nan_bits, 1)[0]));
}

TEST(DequantizeTest, Bf16HandValues) {
  const uint16_t in[] = {0x3f80, 0xc040, 0x4049, 0x0000, 0xff80};
  const float expected[] = {1.0f, -3.0f, 3.140625f, 0.0f, -INFINITY};
  std::vector<float> out = Dequantize(GgmlType::kBF16, in, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

TEST(DequantizeTest, Q8_0HandBlock) {
  BlockQ8_0 block;
  block.d = 0x3800;  // 0.5
  for (int j = 0; j < 32; ++j) block.qs[j] = static_cast<int8_t>(j - 16);
  block.qs[31] = -128;
  std::vector<float> out = Dequantize(GgmlType::kQ8_0, &block, 32);
  for (int j = 0; j < 31; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16)) << j;
  EXPECT_EQ(out[31], -64.0f);
}

TEST(DequantizeTest, Q4_0HandBlock) {
  BlockQ4_0 block;
  block.d = 0x4000;  // 2.0
  // Element j in the low nibble of qs[j], element j + 16 in the high nibble.
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> out = Dequantize(GgmlType::kQ4_0, &block, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * (j - 8)) << j;
    EXPECT_EQ(out[j + 16], 2.0f * (7 - j)) << j;
  }
}

TEST(DequantizeTest, Q4_1HandBlocks) {
  BlockQ4_1 blocks[2];
  blocks[0].d = 0x3800;  // 0.5
  blocks[0].m = 0xbc00;  // -1.0
  for (int j = 0; j < 16; ++j) blocks[0].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  blocks[1].d = 0x0000;
  blocks[1].m = 0x4200;  // 3.0
  std::memset(blocks[1].qs, 0xff, sizeof(blocks[1].qs));
  std::vector<float> out = Dequantize(GgmlType::kQ4_1, blocks, 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * j - 1.0f) << j;
    EXPECT_EQ(out[j + 16], 0.5f * (15 - j) - 1.0f) << j;
  }
  for (int j = 32; j < 64; ++j) EXPECT_EQ(out[j], 3.0f) << j;
}

TEST(DequantizeTest, Q4_KHandBlock) {
  // d = 1, dmin = 0.5. Sub-block scales/mins: the first four in the low 6 bits
  // of scales[0..3] / scales[4..7]; the last four split between scales[8..11]
  // (low 4 bits) and the top 2 bits of scales[0..7].
  BlockQ4_K block;
  block.d = 0x3c00;
  block.dmin = 0x3800;
  const uint8_t sc[8] = {1, 2, 3, 4, 17, 35, 50, 63};
  const uint8_t mn[8] = {0, 5, 10, 63, 16, 33, 48, 7};
  for (int j = 0; j < 4; ++j) {
    block.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    block.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    block.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xf) | ((mn[j + 4] & 0xf) << 4));
  }
  // Byte 32*c + l holds element 64c + l (low nibble) and 64c + 32 + l (high).
  for (int i = 0; i < 128; ++i) block.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  std::vector<float> out = Dequantize(GgmlType::kQ4_K, &block, 256);
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32;
    const int l = e % 32;
    const int q = (sub % 2 == 0) ? l % 16 : 15 - l % 16;
    EXPECT_EQ(out[e], 1.0f * sc[sub] * q - 0.5f * mn[sub]) << e;
  }
}

TEST(DequantizeTest, Q6_KHandBlock) {
  // Element e = 128h + 32k + l (k = 0..3): 4 low bits from ql[64h + l + 32(k&1)]
  // (low nibble for k < 2, high for k >= 2), 2 high bits from qh[32h + l] bits
  // 2k..2k+1; scale index 8h + 2k + l/16; value d * scale * (q - 32).
  BlockQ6_K block;
  block.d = 0x3400;  // 0.25
  for (int i = 0; i < 16; ++i) block.scales[i] = static_cast<int8_t>(i * 9 - 70);
  for (int i = 0; i < 128; ++i) block.ql[i] = static_cast<uint8_t>(i * 37 + 11);
  for (int i = 0; i < 64; ++i) block.qh[i] = static_cast<uint8_t>(i * 53 + 5);
  std::vector<float> out = Dequantize(GgmlType::kQ6_K, &block, 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t ql = block.ql[64 * h + l + 32 * (k & 1)];
    const int low = k < 2 ? (ql & 0xf) : (ql >> 4);
    const int high = (block.qh[32 * h + l] >> (2 * k)) & 3;
    const int scale = block.scales[8 * h + 2 * k + l / 16];
    EXPECT_EQ(out[e], 0.25f * scale * ((low | (high << 4)) - 32)) << e;
  }
}

TEST(DequantizeTest, Errors) {
  float out[64];
  uint8_t zeros[64] = {};
  absl::Status s = DequantizeRow(GgmlType::kQ8_0, zeros, 33, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("33 Q8_0 values"), std::string::npos) << s;
  EXPECT_NE(s.message().find("block size 32"), std::string::npos) << s;
  s = DequantizeRow(GgmlType::kQ4_K, zeros, -256, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = DequantizeRow(GgmlType::kQ5_0, zeros, 32, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("Q5_0"), std::string::npos) << s;
  s = DequantizeRow(static_cast<GgmlType>(4), zeros, 32, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(DequantizeRow(GgmlType::kQ6_K, zeros, 0, out).ok());
}

class FixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GgufFile>> file =
        GgufFile::Open(TANDEM_SOURCE_DIR "/tests/reference/gguf/quant_fixture.gguf");
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  const TensorInfo& Tensor(const std::string& name) {
    const TensorInfo* t = file_->FindTensor(name);
    CHECK(t != nullptr, "fixture lacks %s", name);
    return *t;
  }

  std::vector<float> Floats(const std::string& name) {
    const TensorInfo& t = Tensor(name);
    EXPECT_EQ(t.type, GgmlType::kF32);
    std::vector<float> out(t.num_elements);
    std::memcpy(out.data(), t.data, t.num_bytes);
    return out;
  }

  void ExpectDequantizeMatches(const std::string& raw, const std::string& expected) {
    const TensorInfo& t = Tensor(raw);
    std::vector<float> want = Floats(expected);
    ASSERT_EQ(static_cast<int64_t>(want.size()), t.num_elements);
    std::vector<float> got = Dequantize(t.type, t.data, t.num_elements);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << raw << " at " << i;
  }

  std::unique_ptr<GgufFile> file_;
};

TEST_F(FixtureTest, Q4_KMatchesGgufPy) { ExpectDequantizeMatches("q4_k.raw", "q4_k.f32"); }
TEST_F(FixtureTest, Q6_KMatchesGgufPy) { ExpectDequantizeMatches("q6_k.raw", "q6_k.f32"); }
TEST_F(FixtureTest, Q8_0MatchesGgufPy) { ExpectDequantizeMatches("q8_0.ref", "q8_0.f32"); }
TEST_F(FixtureTest, Q4_0MatchesGgufPy) { ExpectDequantizeMatches("q4_0.ref", "q4_0.f32"); }
TEST_F(FixtureTest, Q4_1MatchesGgufPy) { ExpectDequantizeMatches("q4_1.ref", "q4_1.f32"); }

template <typename Block>
void ExpectQuantizerMatches(const std::vector<float>& x, const TensorInfo& ref,
                            void (*quantize)(const float*, int64_t, Block*)) {
  std::vector<Block> blocks(x.size() / 32);
  quantize(x.data(), static_cast<int64_t>(x.size()), blocks.data());
  ASSERT_EQ(blocks.size() * sizeof(Block), ref.num_bytes);
  const auto* got = reinterpret_cast<const uint8_t*>(blocks.data());
  for (size_t i = 0; i < ref.num_bytes; ++i) {
    ASSERT_EQ(got[i], ref.data[i]) << ref.name << " byte " << i;
  }
}

TEST_F(FixtureTest, QuantizersMatchGgufPyBitForBit) {
  std::vector<float> x = Floats("quant.input");
  ASSERT_EQ(x.size(), 128u);
  ExpectQuantizerMatches<BlockQ8_0>(x, Tensor("q8_0.ref"), &QuantizeRowQ8_0);
  ExpectQuantizerMatches<BlockQ4_0>(x, Tensor("q4_0.ref"), &QuantizeRowQ4_0);
  ExpectQuantizerMatches<BlockQ4_1>(x, Tensor("q4_1.ref"), &QuantizeRowQ4_1);
}

TEST(QuantizeTest, HandBlocks) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) * 0.25f;  // max |x| = 4 at j=0
  BlockQ8_0 q8;
  QuantizeRowQ8_0(x, 32, &q8);
  EXPECT_EQ(Fp16ToFp32(q8.d), Fp16ToFp32(Fp32ToFp16(4.0f / 127.0f)));
  EXPECT_EQ(q8.qs[0], -127);
  EXPECT_EQ(q8.qs[16], 0);
  EXPECT_EQ(q8.qs[20], 32);  // 1.0 / (4/127) = 31.75

  BlockQ4_0 q4;
  QuantizeRowQ4_0(x, 32, &q4);
  EXPECT_EQ(Fp16ToFp32(q4.d), 0.5f);  // -4 / -8
  EXPECT_EQ(q4.qs[0] & 0xf, 0);       // -4 / 0.5 + 8.5 = 0.5 -> 0
  EXPECT_EQ(q4.qs[15] >> 4, 15);      // x[31] = 3.75: 7.5 + 8.5 = 16 -> clamped 15

  BlockQ4_1 q41;
  QuantizeRowQ4_1(x, 32, &q41);
  EXPECT_EQ(Fp16ToFp32(q41.m), -4.0f);
  EXPECT_EQ(Fp16ToFp32(q41.d), Fp16ToFp32(Fp32ToFp16(7.75f / 15.0f)));
  EXPECT_EQ(q41.qs[0] & 0xf, 0);
  EXPECT_EQ(q41.qs[15] >> 4, 15);

  float zeros[32] = {};
  QuantizeRowQ4_1(zeros, 32, &q41);
  EXPECT_EQ(q41.d, 0);
  for (uint8_t b : q41.qs) EXPECT_EQ(b, 0);
}

TEST(QuantizeTest, RoundTripErrorIsBounded) {
  std::vector<float> x(256);
  uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int32_t>(state >> 8) % 2000) / 500.0f;
  }
  std::vector<BlockQ8_0> q8(8);
  std::vector<BlockQ4_1> q41(8);
  QuantizeRowQ8_0(x.data(), 256, q8.data());
  QuantizeRowQ4_1(x.data(), 256, q41.data());
  std::vector<float> y8 = Dequantize(GgmlType::kQ8_0, q8.data(), 256);
  std::vector<float> y41 = Dequantize(GgmlType::kQ4_1, q41.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const float d8 = Fp16ToFp32(q8[i / 32].d);
    const float d41 = Fp16ToFp32(q41[i / 32].d);
    EXPECT_LE(std::fabs(y8[i] - x[i]), 0.5f * d8 + 4e-3f * std::fabs(x[i])) << i;
    EXPECT_LE(std::fabs(y41[i] - x[i]), 0.5f * d41 + 4e-3f * (std::fabs(x[i]) + 4.0f)) << i;
  }
}

}  // namespace
}  // namespace tandem::gguf
