// Conversion of GGUF tensor rows to f32 (exactly as ggml's dequantize_row_*)
// and ggml's reference quantizers for the 32-element block types, used by the
// kernels' tests and by the model generator.
//
// Thread-safety: pure functions.
#ifndef TANDEM_ENGINE_GGUF_DEQUANTIZE_H_
#define TANDEM_ENGINE_GGUF_DEQUANTIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/ggml_type.h"
#include "kernels/quant_formats.h"

namespace tandem::gguf {

// dst[0, n) = the n values encoded at `src` (n / block_size blocks of `type`).
// InvalidArgument when n is negative or not a multiple of the block size;
// Unimplemented, naming the type, for types without `supported` traits.
absl::Status DequantizeRow(GgmlType type, const void* src, int64_t n, float* dst);

// ggml's reference quantizers (quantize_row_*_ref): n must be a multiple of 32
// (CHECKed); writes n / 32 blocks to `out`.
// Q8_0: d = max|x| / 127, q = round(x / d).
void QuantizeRowQ8_0(const float* x, int64_t n, BlockQ8_0* out);
// Q4_0: d = (value of largest magnitude) / -8, q = min(15, trunc(x / d + 8.5)).
void QuantizeRowQ4_0(const float* x, int64_t n, BlockQ4_0* out);
// Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)).
void QuantizeRowQ4_1(const float* x, int64_t n, BlockQ4_1* out);

}  // namespace tandem::gguf

#endif  // TANDEM_ENGINE_GGUF_DEQUANTIZE_H_
