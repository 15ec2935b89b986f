// PackRows16: a quantized weight matrix with its rows interleaved 16 at a
// time, for integer dots whose 32-bit lanes are 16 weight rows. With the
// plain layout a row's block dot ends in 8 partial sums that must be reduced
// across lanes (shuffles) once per block and activation row; interleaved, one
// vpdpbusd of 16 rows' 4-byte groups against a broadcast activation group
// leaves each row's sum in its own lane, so the reduction disappears and each
// unpacked weight vector serves every activation row of a small batch (decode
// steps, speculative verification).
//
// Layout: ceil(rows / 16) groups of 16 rows (the last padded with zero rows),
// each of nb = cols / 32 blocks of PackedBlockBytes(type) bytes:
//   uint16 d[16]         the rows' f16 scales
//   uint16 m[16]         Q4_1 only: the rows' f16 mins
//   uint8  q[J][16][4]   q[j][lane][k] = byte 4j + k of row `lane`'s block:
//                        Q4_0 / Q4_1 (J = 4): the stored nibble pairs (low
//                        nibble element 4j + k, high nibble 16 + 4j + k);
//                        Q8_0 (J = 8): the quant + 128.
// With u the unsigned weight and o its offset (Q4_1 0, Q4_0 8, Q8_0 128),
// a block's integer dot is Σ u·x − o·Σx: exact in int32, the same value the
// plain tiles compute.
#ifndef TANDEM_KERNELS_CPU_PACKED_ROWS16_H_
#define TANDEM_KERNELS_CPU_PACKED_ROWS16_H_

#include <cstdint>

#include "kernels/ggml_type.h"
#include "kernels/kernels.h"

namespace tandem::kernels {

inline constexpr int64_t kPackedRows = 16;

// Bytes of one packed block (16 rows × 32 columns); 0 for types without a
// packed form.
int64_t PackedBlockBytes(gguf::GgmlType type);

// The unsigned weight offset o above.
int32_t PackedWeightOffset(gguf::GgmlType type);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_PACKED_ROWS16_H_
