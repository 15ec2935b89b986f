// Scalar reference dequantization of GGUF weight rows, written for kernels/
// (which must not depend on engine/gguf's library, only its header-only block
// layouts) and used by MatMul's reference-precision path.
#ifndef TANDEM_KERNELS_CPU_DEQUANTIZE_REF_H_
#define TANDEM_KERNELS_CPU_DEQUANTIZE_REF_H_

#include <cstdint>

#include "kernels/ggml_type.h"

namespace tandem::kernels {

// Elements per block of `type` (1 for F32/F16/BF16); 0 when MatMul does not
// support the type.
int64_t WeightBlockElems(gguf::GgmlType type);
// Bytes per block of `type`; 0 when unsupported.
int64_t WeightBlockBytes(gguf::GgmlType type);
// True for the types MatMul supports: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K.
bool IsSupportedWeightType(gguf::GgmlType type);

// dst[0, n) = the n values encoded at src. n must be a multiple of
// WeightBlockElems(type) and the type supported (CHECKed).
void DequantizeRowRef(gguf::GgmlType type, const void* src, int64_t n, float* dst);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_DEQUANTIZE_REF_H_
