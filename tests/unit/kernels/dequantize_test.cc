// DequantizeRowRef against blocks built by hand from the format definitions
// (element -> sub-block scale and quant), independent of the decoder's loops.
#include "kernels/cpu/dequantize_ref.h"

#include <cstring>
#include <vector>

#include "kernels/quant_formats.h"
#include "gtest/gtest.h"

namespace tandem::kernels {
namespace {

using gguf::Fp16ToFp32;
using gguf::Fp32ToFp16;
using gguf::GgmlType;

TEST(DequantizeTest, Q8_0) {
  gguf::BlockQ8_0 b[2];
  b[0].d = Fp32ToFp16(0.5f);
  b[1].d = Fp32ToFp16(-0.125f);
  for (int j = 0; j < 32; ++j) {
    b[0].qs[j] = static_cast<int8_t>(j - 16);
    b[1].qs[j] = static_cast<int8_t>(j == 0 ? -128 : 127 - j);
  }
  float y[64];
  DequantizeRowRef(GgmlType::kQ8_0, b, 64, y);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 16)) << j;
    EXPECT_EQ(y[32 + j], -0.125f * (j == 0 ? -128 : 127 - j)) << j;
  }
}

TEST(DequantizeTest, Q4_0AndQ4_1NibbleOrder) {
  gguf::BlockQ4_0 a;
  gguf::BlockQ4_1 b;
  a.d = Fp32ToFp16(2.0f);
  b.d = Fp32ToFp16(0.25f);
  b.m = Fp32ToFp16(-1.0f);
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = (e * 7 + 3) % 16;
  // element e < 16 in the low nibble of byte e, element e >= 16 in the high nibble of byte e-16
  for (int j = 0; j < 16; ++j) {
    a.qs[j] = b.qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  }
  float ya[32], yb[32];
  DequantizeRowRef(GgmlType::kQ4_0, &a, 32, ya);
  DequantizeRowRef(GgmlType::kQ4_1, &b, 32, yb);
  for (int e = 0; e < 32; ++e) {
    EXPECT_EQ(ya[e], 2.0f * (q[e] - 8)) << e;
    EXPECT_EQ(yb[e], 0.25f * q[e] - 1.0f) << e;
  }
}

TEST(DequantizeTest, Q4_K) {
  gguf::BlockQ4_K b;
  std::memset(&b, 0, sizeof(b));
  const float d = 0.5f, dmin = 0.25f;
  b.d = Fp32ToFp16(d);
  b.dmin = Fp32ToFp16(dmin);
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = (j * 23 + 5) % 64;  // exercise all 6 bits, incl. the split high bits
    mn[j] = 63 - (j * 17) % 64;
  }
  // 6-bit packing: bytes 0..3 scales 0..3 (+ top 2 bits of scale 4..7),
  // bytes 4..7 mins 0..3 (+ top bits of mins 4..7), bytes 8..11 low nibbles of
  // scale (low half) and min (high half) 4..7.
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xf) | ((mn[j + 4] & 0xf) << 4));
  }
  int q[256];
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 11 + e / 32) % 16;
    // 64-element chunk c: bytes qs[32c, 32c+32); first 32 elements low nibbles, next 32 high.
    const int c = e / 64, l = e % 32;
    const bool high = (e % 64) >= 32;
    b.qs[32 * c + l] |= static_cast<uint8_t>(q[e] << (high ? 4 : 0));
  }
  float y[256];
  DequantizeRowRef(GgmlType::kQ4_K, &b, 256, y);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    EXPECT_FLOAT_EQ(y[e], d * sc[s] * q[e] - dmin * mn[s]) << e;
  }
}

TEST(DequantizeTest, Q6_K) {
  gguf::BlockQ6_K b;
  std::memset(&b, 0, sizeof(b));
  const float d = 0.125f;
  b.d = Fp32ToFp16(d);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s * 13 - 100);
  int q[256];  // signed value in [-32, 31]
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 37 + 11) % 64 - 32;
    const int u = q[e] + 32;
    // half h: 128 elements; quarter k, lane l. Low 4 bits: ql[64h + l + 32(k&1)],
    // low nibble for k < 2, high for k >= 2; high 2 bits: qh[32h + l] bits 2k..2k+1.
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    b.ql[64 * h + l + 32 * (k & 1)] |= static_cast<uint8_t>((u & 0xf) << (k < 2 ? 0 : 4));
    b.qh[32 * h + l] |= static_cast<uint8_t>((u >> 4) << (2 * k));
  }
  float y[256];
  DequantizeRowRef(GgmlType::kQ6_K, &b, 256, y);
  for (int e = 0; e < 256; ++e) {
    EXPECT_FLOAT_EQ(y[e], d * b.scales[e / 16] * q[e]) << e;  // 16 sub-blocks of 16
  }
}

TEST(DequantizeTest, HalfTypesAndF32) {
  const float values[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f};
  std::vector<uint16_t> h, bf;
  for (float v : values) {
    h.push_back(Fp32ToFp16(v));
    bf.push_back(gguf::Fp32ToBf16(v));
  }
  const int n = static_cast<int>(h.size());
  std::vector<float> y(n), z(n), w(n);
  DequantizeRowRef(GgmlType::kF16, h.data(), n, y.data());
  DequantizeRowRef(GgmlType::kBF16, bf.data(), n, z.data());
  DequantizeRowRef(GgmlType::kF32, values, n, w.data());
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(y[i], values[i]) << i;  // all exactly representable in f16
    EXPECT_EQ(z[i], gguf::Bf16ToFp32(bf[i])) << i;
    EXPECT_NEAR(z[i], values[i], std::abs(values[i]) / 128) << i;
    EXPECT_EQ(w[i], values[i]);
  }
}

TEST(DequantizeTest, Geometry) {
  EXPECT_EQ(WeightBlockElems(GgmlType::kQ4_1), 32);
  EXPECT_EQ(WeightBlockBytes(GgmlType::kQ4_1), 20);
  EXPECT_EQ(WeightBlockElems(GgmlType::kQ6_K), 256);
  EXPECT_EQ(WeightBlockBytes(GgmlType::kQ6_K), 210);
  EXPECT_EQ(WeightBlockBytes(GgmlType::kQ4_K), 144);
  EXPECT_FALSE(IsSupportedWeightType(GgmlType::kQ5_K));
  EXPECT_TRUE(IsSupportedWeightType(GgmlType::kBF16));
}

}  // namespace
}  // namespace tandem::kernels
