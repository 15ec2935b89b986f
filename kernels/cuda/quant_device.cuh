// The GGUF weight encodings the CUDA kernels read (layouts:
// kernels/quant_formats.h): F32, F16, BF16, Q8_0, Q4_0 and Q4_1. The host
// checks a weight view against them; the device decodes elements with the
// same float operations, in the same order, as kernels/cpu/dequantize_ref.cc
// and without FMA contraction (__fmul_rn / __fadd_rn), so a dequantized
// element has the reference's bits.
#ifndef TANDEM_KERNELS_CUDA_QUANT_DEVICE_CUH_
#define TANDEM_KERNELS_CUDA_QUANT_DEVICE_CUH_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/dequantize_ref.h"
#include "kernels/cuda/cuda_compat.cuh"
#include "kernels/ggml_type.h"
#include "kernels/kernels.h"
#include "kernels/quant_formats.h"

namespace tandem::cuda {

// Whether the CUDA kernels decode `type`.
inline bool IsDeviceDecodedType(gguf::GgmlType type) {
  using gguf::GgmlType;
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1;
}

// OK when `w` is a matrix the CUDA kernels can read: a decoded type, cols a
// positive multiple of the type's block, row_bytes enough for cols, rows and
// data aligned for the type's loads (4 bytes for F32, else 2), rows >= 0.
// INVALID_ARGUMENT naming `op`, the value and the limit otherwise.
inline absl::Status CheckDeviceWeight(const kernels::WeightView& w, std::string_view op) {
  if (!IsDeviceDecodedType(w.type)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: weight type %s unsupported (F32, F16, BF16, Q8_0, Q4_0, Q4_1 are)", op,
                        gguf::TypeName(w.type)));
  }
  const int64_t block_elems = kernels::WeightBlockElems(w.type);
  if (w.cols <= 0 || w.cols % block_elems != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cols %d is not a positive multiple of %s's block of %d", op, w.cols,
                        gguf::TypeName(w.type), block_elems));
  }
  const int64_t min_row_bytes = w.cols / block_elems * kernels::WeightBlockBytes(w.type);
  if (w.row_bytes < min_row_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: row_bytes %d below the %d bytes of %d %s elements", op, w.row_bytes,
                        min_row_bytes, w.cols, gguf::TypeName(w.type)));
  }
  // The widest field a kernel loads: f32 values, else 16-bit values or
  // scales. A GPU faults on a misaligned load.
  const int64_t align = w.type == gguf::GgmlType::kF32 ? 4 : 2;
  if (w.row_bytes % align != 0 || reinterpret_cast<uintptr_t>(w.data) % align != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: row_bytes %d and the data address %p must be multiples of %s's "
                        "alignment %d",
                        op, w.row_bytes, w.data, gguf::TypeName(w.type), align));
  }
  if (w.rows < 0) return absl::InvalidArgumentError(absl::StrFormat("%s: rows %d < 0", op, w.rows));
  return absl::OkStatus();
}

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

#endif  // TANDEM_KERNELS_CUDA_QUANT_DEVICE_CUH_
