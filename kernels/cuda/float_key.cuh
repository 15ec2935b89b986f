// An order-preserving map from floats to unsigned keys, for bisections over
// the bits of a value: a < b (floats, not NaN) iff OrderedKey(a) <
// OrderedKey(b), and KeyToFloat inverts it. -0 sorts just below +0.
#ifndef TANDEM_KERNELS_CUDA_FLOAT_KEY_CUH_
#define TANDEM_KERNELS_CUDA_FLOAT_KEY_CUH_

#include <cstdint>

#include "kernels/cuda/cuda_compat.cuh"

namespace tandem::cuda {

__device__ __forceinline__ uint32_t OrderedKey(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float KeyToFloat(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_FLOAT_KEY_CUH_
