// __half and __nv_bfloat16 under emulation: 16-bit storage types with the
// conversions of cuda_fp16.h / cuda_bf16.h. float -> 16 bit rounds to nearest,
// ties to even (as __float2half / __float2bfloat16 and cvt.rn do); NaN becomes
// the canonical 0x7FFF, infinities and signed zeros are kept; values beyond
// the largest finite half round to infinity. Arithmetic goes through float
// (write __half2float(a) + __half2float(b)); no packed __half2 types yet.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_HALF_TYPES_H_
#define TANDEM_KERNELS_CUDA_EMULATION_HALF_TYPES_H_

#include <bit>
#include <cstdint>

namespace tandem::cuda_emu {

// Binary16 bits nearest to f (ties to even).
constexpr uint16_t FloatToHalfBits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t x = u & 0x7fffffffu;
  if (x > 0x7f800000u) return 0x7fff;                                  // NaN
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (x >= 0x38800000u) {                                              // normal half
    const uint32_t rest = x & 0x1fffu;
    uint32_t h = ((x >> 13) - ((127 - 15) << 10));
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carry may reach the exponent
    return static_cast<uint16_t>(sign | h);
  }
  const uint32_t exponent = x >> 23;                       // subnormal half: units of 2^-24
  if (exponent < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
  const uint32_t mantissa = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exponent;  // 14..24
  uint32_t h = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t tie = 1u << (shift - 1);
  if (rest > tie || (rest == tie && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

constexpr float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);
  int e = 127 - 15 + 1;  // normalize the subnormal
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(e) << 23) |
                              ((mantissa & 0x3ffu) << 13));
}

// bfloat16 bits nearest to f (ties to even): the high half of f, rounded.
constexpr uint16_t FloatToBfloat16Bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

constexpr float Bfloat16BitsToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace tandem::cuda_emu

// As CUDA's: converts implicitly from and to float (rounding to nearest even).
struct __half {
  uint16_t __x;
  __half() = default;
  constexpr __half(float f) : __x(tandem::cuda_emu::FloatToHalfBits(f)) {}
  constexpr operator float() const { return tandem::cuda_emu::HalfBitsToFloat(__x); }
};

struct __nv_bfloat16 {
  uint16_t __x;
  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(float f) : __x(tandem::cuda_emu::FloatToBfloat16Bits(f)) {}
  constexpr operator float() const { return tandem::cuda_emu::Bfloat16BitsToFloat(__x); }
};

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return tandem::cuda_emu::HalfBitsToFloat(h.__x); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) {
  __half h;
  h.__x = u;
  return h;
}

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) {
  return tandem::cuda_emu::Bfloat16BitsToFloat(b.__x);
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  __nv_bfloat16 b;
  b.__x = u;
  return b;
}

#endif  // TANDEM_KERNELS_CUDA_EMULATION_HALF_TYPES_H_
