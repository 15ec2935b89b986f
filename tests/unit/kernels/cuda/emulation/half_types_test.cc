// __half and __nv_bfloat16 conversions: round to nearest, ties to even, on
// chosen cases (ties, overflow, subnormals, signed zeros, NaN) and against
// references on many random floats (GCC's _Float16 for half; the nearer of
// the two neighbouring bfloat16 values, computed in double, for bfloat16).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace {

uint16_t HalfBits(float f) { return __half_as_ushort(__float2half(f)); }
uint16_t Bf16Bits(float f) { return __bfloat16_as_ushort(__float2bfloat16(f)); }

TEST(HalfTypesTest, HalfRoundsTiesToEven) {
  EXPECT_EQ(HalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even below
  EXPECT_EQ(HalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, even above
  EXPECT_EQ(HalfBits(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(HalfBits(std::ldexp(1.0f, -25)), 0x0000);      // subnormal tie to zero
  EXPECT_EQ(HalfBits(3 * std::ldexp(1.0f, -25)), 0x0002);  // subnormal tie up to even
  EXPECT_EQ(HalfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(HalfBits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(HalfBits(std::ldexp(1023.0f, -24) + std::ldexp(1.0f, -25)), 0x0400);  // into normals
}

TEST(HalfTypesTest, HalfOverflowInfinityZeroAndNan) {
  EXPECT_EQ(HalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(HalfBits(65519.99f), 0x7bff);
  EXPECT_EQ(HalfBits(65520.0f), 0x7c00);  // tie between 65504 and 2^16: even is infinity
  EXPECT_EQ(HalfBits(-1e10f), 0xfc00);
  EXPECT_EQ(HalfBits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(HalfBits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(HalfBits(-0.0f), 0x8000);
  EXPECT_EQ(HalfBits(std::numeric_limits<float>::quiet_NaN()), 0x7fff);
  EXPECT_EQ(HalfBits(-std::numeric_limits<float>::signaling_NaN()), 0x7fff);
  EXPECT_TRUE(std::isnan(__half2float(__ushort_as_half(0x7e00))));
  EXPECT_TRUE(std::isinf(__half2float(__ushort_as_half(0xfc00))));
}

TEST(HalfTypesTest, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = __half2float(__ushort_as_half(static_cast<uint16_t>(bits)));
    const _Float16 reference = std::bit_cast<_Float16>(static_cast<uint16_t>(bits));
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0) {
      ASSERT_TRUE(std::isnan(f)) << bits;
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(reference)) << bits;
    ASSERT_EQ(std::signbit(f), (bits & 0x8000) != 0) << bits;
    ASSERT_EQ(HalfBits(f), bits) << bits;
  }
}

TEST(HalfTypesTest, HalfMatchesCompilerConversionOnRandomFloats) {
  std::mt19937 rng(42);
  for (int i = 0; i < 2000000; ++i) {
    // Exponents around half's range, where rounding happens.
    const uint32_t bits = (rng() & 0x807fffffu) | ((100u + rng() % 60u) << 23);
    const float f = std::bit_cast<float>(bits);
    ASSERT_EQ(HalfBits(f), std::bit_cast<uint16_t>(static_cast<_Float16>(f))) << f;
  }
}

TEST(HalfTypesTest, Bfloat16RoundsTiesToEven) {
  EXPECT_EQ(Bf16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(Bf16Bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(Bf16Bits(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
  EXPECT_EQ(Bf16Bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(Bf16Bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(Bf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(Bf16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(Bf16Bits(std::numeric_limits<float>::quiet_NaN()), 0x7fff);
  EXPECT_EQ(Bf16Bits(std::bit_cast<float>(0xff800001u)),
            0x7fff);  // a NaN that rounding would make inf
  EXPECT_TRUE(std::isnan(__bfloat162float(__ushort_as_bfloat16(0x7fff))));
}

TEST(HalfTypesTest, Bfloat16IsTheNearestNeighbourOnRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t bits = rng();
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) continue;
    const uint16_t got = Bf16Bits(f);
    const uint16_t below = static_cast<uint16_t>(bits >> 16);  // truncation toward zero
    const uint16_t above = static_cast<uint16_t>(below + 1);
    if ((bits & 0xffffu) == 0) {
      ASSERT_EQ(got, below) << f;
      continue;
    }
    const double low = std::abs(static_cast<double>(__bfloat162float(__ushort_as_bfloat16(below))));
    const double high_f = __bfloat162float(__ushort_as_bfloat16(above));
    const double high = std::isinf(high_f) ? std::ldexp(1.0, 128) : std::abs(high_f);
    const double x = std::abs(static_cast<double>(f));
    const uint16_t nearest = (x - low < high - x)   ? below
                             : (high - x < x - low) ? above
                                                    : ((below & 1) == 0 ? below : above);
    ASSERT_EQ(got, nearest) << f;
  }
}

TEST(HalfTypesTest, EveryBfloat16RoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = __bfloat162float(__ushort_as_bfloat16(static_cast<uint16_t>(bits)));
    if (std::isnan(f)) continue;
    ASSERT_EQ(Bf16Bits(f), bits) << bits;
  }
}

}  // namespace
