// The host-side check of a weight matrix that the CUDA kernels read (their
// encodings: quant_device.cuh). Plain C++: it compiles with the host
// compiler in both builds, unlike quant_device.cuh, whose device functions
// need nvcc or the emulation.
#ifndef TANDEM_KERNELS_CUDA_PRIMITIVES_WEIGHT_CHECK_H_
#define TANDEM_KERNELS_CUDA_PRIMITIVES_WEIGHT_CHECK_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/dequantize_ref.h"
#include "kernels/ggml_type.h"
#include "kernels/kernels.h"

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

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_PRIMITIVES_WEIGHT_CHECK_H_
