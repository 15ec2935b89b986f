// The per-ISA inner kernels of MatMul: activation quantization (f32 -> BlockQ8A),
// integer-dot tiles for Q8_0 / Q4_0 / Q4_1 weights, and the f32 dot product of
// the reference-precision path. One table per ISA; the reference table is the
// plain scalar twin every optimized table is tested against.
//
// Numerics shared by all tables (so results differ only by fp32 summation
// order): a block's integer dot Σ qw·qx is exact in int32; it is scaled by the
// float product dw·dx and summed in fp32; Q4_1 adds m·s per block; Q4_0 uses
// (qw - 8). Within one ISA the result for an (activation row, weight row) pair
// does not depend on the tile shape, the batch size or the thread count.
#ifndef TANDEM_KERNELS_CPU_QUANT_KERNELS_H_
#define TANDEM_KERNELS_CPU_QUANT_KERNELS_H_

#include <cstdint>

#include "kernels/cpu/block_q8a.h"
#include "kernels/kernels.h"

namespace tandem::kernels {

// out[n / 32] = x[n] quantized block by block; n % 32 == 0.
// d = max|x| / 127, qs = round-to-nearest-even(x * (1 / d)), s = d * Σ qs.
using QuantizeRowFn = void (*)(const float* x, int64_t n, BlockQ8A* out);

// y[c * ldy + r] = Σ_b dot(weight row r block b, x[c * nb + b]) for
// r < num_rows, c < num_x. Weight row r starts at w + r * row_bytes and holds
// nb blocks of the table's weight type; x: [num_x, nb] BlockQ8A.
using QuantTileFn = void (*)(const uint8_t* w, int64_t row_bytes, int64_t num_rows,
                             const BlockQ8A* x, int64_t num_x, int64_t nb, float* y, int64_t ldy);

// The same for weights packed by PackRows16: `groups` points at the packed
// group holding the first row (rows start on a multiple of 16), num_rows rows
// from there. Bit-identical to the table's QuantTileFn on the plain rows.
using PackedTileFn = void (*)(const uint8_t* groups, int64_t num_rows, const BlockQ8A* x,
                              int64_t num_x, int64_t nb, float* y, int64_t ldy);

// Σ a[i] * b[i] over n floats, fp32 accumulation.
using DotF32Fn = float (*)(const float* a, const float* b, int64_t n);

// out[c] = dot_f32(a, b + c * ldb, n) for c < 3, bit for bit: one row against
// three, so a's loads serve three dot products.
using DotF32x3Fn = void (*)(const float* a, const float* b, int64_t ldb, int64_t n, float* out);

struct QuantKernels {
  QuantizeRowFn quantize_row = nullptr;
  QuantTileFn tile_q8_0 = nullptr;
  QuantTileFn tile_q4_0 = nullptr;
  QuantTileFn tile_q4_1 = nullptr;
  DotF32Fn dot_f32 = nullptr;
  // Tiles over packed rows, for batches of at most max_packed_x activation
  // rows; null where the ISA has none.
  PackedTileFn packed_q8_0 = nullptr;
  PackedTileFn packed_q4_0 = nullptr;
  PackedTileFn packed_q4_1 = nullptr;
  int64_t max_packed_x = 0;
  // Null where the ISA has none (MatMul then calls dot_f32 three times).
  DotF32x3Fn dot_f32_x3 = nullptr;
};

// The table's packed tile for weights of `type`; null where it has none.
inline PackedTileFn PackedTileForType(const QuantKernels& k, gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ8_0:
      return k.packed_q8_0;
    case gguf::GgmlType::kQ4_0:
      return k.packed_q4_0;
    case gguf::GgmlType::kQ4_1:
      return k.packed_q4_1;
    default:
      return nullptr;
  }
}

const QuantKernels& QuantKernelsRef();
const QuantKernels& QuantKernelsAvx2();    // callable only when HardwareIsa() >= kAvx2
const QuantKernels& QuantKernelsAvx512();  // callable only when HardwareIsa() == kAvx512

// The table for ClampIsa(isa).
const QuantKernels& QuantKernelsFor(Isa isa);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_QUANT_KERNELS_H_
