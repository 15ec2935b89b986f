// Quantized block layouts exactly as GGUF/ggml stores them, plus half-precision
// conversions. Header-only plain structs: the kernels read these directly.
#ifndef TANDEM_KERNELS_QUANT_FORMATS_H_
#define TANDEM_KERNELS_QUANT_FORMATS_H_

#include <cstdint>
#include <cstring>

namespace tandem::gguf {

inline constexpr int kQK = 32;    // elements per Q4_0 / Q4_1 / Q8_0 block
inline constexpr int kQKK = 256;  // elements per K-quant super-block
inline constexpr int kKScaleSize = 12;

// x = d * q, q in [-128, 127]
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// x = d * (q - 8), q a nibble; element j in low nibble of qs[j], element j+16 in the high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// x = d * q + m, same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// 256 elements in 8 sub-blocks of 32 with 6-bit scales and mins.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// 256 elements: 4 low bits in ql, 2 high bits in qh, 16 int8 scales.
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// IEEE half -> float, exact for every value (subnormals, inf, nan).
inline float Fp16ToFp32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// float -> IEEE half, round to nearest even.
inline uint16_t Fp32ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (abs < 0x38800000) {  // subnormal or zero in half
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;  // 113 - e + 13
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000) >> 13);
  uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float Bf16ToFp32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// float -> bf16, round to nearest even (nan stays nan).
inline uint16_t Fp32ToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

}  // namespace tandem::gguf

#endif  // TANDEM_KERNELS_QUANT_FORMATS_H_
