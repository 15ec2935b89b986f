// The GGUF weight encodings the CUDA kernels read (layouts:
// kernels/quant_formats.h): F32, F16, BF16, Q8_0, Q4_0 and Q4_1. The host
// checks a weight view against them (weight_check.h); the device decodes
// elements with the same float operations, in the same order, as
// kernels/cpu/dequantize_ref.cc and without FMA contraction (__fmul_rn /
// __fadd_rn), so a dequantized element has the reference's bits.
#ifndef TANDEM_KERNELS_CUDA_PRIMITIVES_QUANT_DEVICE_CUH_
#define TANDEM_KERNELS_CUDA_PRIMITIVES_QUANT_DEVICE_CUH_

#include <cstdint>

#include "kernels/cpu/dequantize_ref.h"
#include "kernels/cuda/primitives/weight_check.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/ggml_type.h"
#include "kernels/kernels.h"
#include "kernels/quant_formats.h"

namespace tandem::cuda {

__device__ __forceinline__ float HalfBitsToFloat(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

__device__ __forceinline__ float Bf16BitsToFloat(uint16_t bits) {
  return __uint_as_float(static_cast<unsigned int>(bits) << 16);
}

// Element e (any index into the row) of a row of `kType`, as the reference
// dequantizes it. kType is F32, F16, BF16, Q8_0, Q4_0 or Q4_1.
template <gguf::GgmlType kType>
__device__ __forceinline__ float DequantElement(const uint8_t* row, int64_t e) {
  using gguf::GgmlType;
  constexpr int kHalfBlock = gguf::kQK / 2;
  if constexpr (kType == GgmlType::kF32) {
    return reinterpret_cast<const float*>(row)[e];
  } else if constexpr (kType == GgmlType::kF16) {
    return HalfBitsToFloat(reinterpret_cast<const uint16_t*>(row)[e]);
  } else if constexpr (kType == GgmlType::kBF16) {
    return Bf16BitsToFloat(reinterpret_cast<const uint16_t*>(row)[e]);
  } else if constexpr (kType == GgmlType::kQ8_0) {
    const auto& b = reinterpret_cast<const gguf::BlockQ8_0*>(row)[e / gguf::kQK];
    return __fmul_rn(HalfBitsToFloat(b.d), static_cast<float>(b.qs[e % gguf::kQK]));
  } else if constexpr (kType == GgmlType::kQ4_0) {
    const auto& b = reinterpret_cast<const gguf::BlockQ4_0*>(row)[e / gguf::kQK];
    const int j = static_cast<int>(e % gguf::kQK);
    const int q = j < kHalfBlock ? (b.qs[j] & 0xf) : (b.qs[j - kHalfBlock] >> 4);
    return __fmul_rn(HalfBitsToFloat(b.d), static_cast<float>(q - 8));
  } else {
    static_assert(kType == GgmlType::kQ4_1, "DequantElement: unsupported type");
    const auto& b = reinterpret_cast<const gguf::BlockQ4_1*>(row)[e / gguf::kQK];
    const int j = static_cast<int>(e % gguf::kQK);
    const int q = j < kHalfBlock ? (b.qs[j] & 0xf) : (b.qs[j - kHalfBlock] >> 4);
    return __fadd_rn(__fmul_rn(HalfBitsToFloat(b.d), static_cast<float>(q)), HalfBitsToFloat(b.m));
  }
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_PRIMITIVES_QUANT_DEVICE_CUH_
