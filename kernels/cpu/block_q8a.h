// BlockQ8A: one 32-element block of activations quantized to int8 for the
// integer dot products against Q8_0 / Q4_0 / Q4_1 weights (llama.cpp calls
// this layout q8_1). x[j] ≈ d * qs[j] with qs in [-127, 127] (never -128, so
// the sign trick of the AVX kernels cannot overflow), and s = d * Σ qs[j]
// carries the block sum that Q4_1's min term needs; sum is Σ qs[j] itself
// (the packed tiles' offset correction).
#ifndef TANDEM_KERNELS_CPU_BLOCK_Q8A_H_
#define TANDEM_KERNELS_CPU_BLOCK_Q8A_H_

#include <cstdint>

namespace tandem::kernels {

inline constexpr int kQ8ABlock = 32;

struct BlockQ8A {
  float d;  // scale: max|x| / 127 over the block (0 for an all-zero block)
  float s;  // d * sum(qs), as float
  int32_t sum;  // sum(qs)
  int8_t qs[kQ8ABlock];
};
static_assert(sizeof(BlockQ8A) == 44);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_BLOCK_Q8A_H_
