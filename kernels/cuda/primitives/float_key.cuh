// An order-preserving map from floats to unsigned keys, for bisections over
// the bits of a value: a < b (floats, not NaN) iff OrderedKey(a) <
// OrderedKey(b), and KeyToFloat inverts it. -0 sorts just below +0. Also the
// block-wide bisection over it that finds a row's exact k-th largest value.
#ifndef TANDEM_KERNELS_CUDA_PRIMITIVES_FLOAT_KEY_CUH_
#define TANDEM_KERNELS_CUDA_PRIMITIVES_FLOAT_KEY_CUH_

#include <cmath>
#include <cstdint>

#include "kernels/cuda/primitives/block_reduce.cuh"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

__device__ __forceinline__ uint32_t OrderedKey(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float KeyToFloat(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// The exact k-th largest live value (not NaN, not -inf) of row[0, n), k <=
// the number of live ones: the largest key with at least k live keys >= it,
// found bit by bit (32 block-wide counts). Every thread of the block calls
// it; `scratch` is kMaxWarpsPerBlock ints of shared memory.
__device__ __forceinline__ float BlockKthLargest(const float* row, int n, int k,
                                                 int32_t* scratch) {
  uint32_t kth = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t trial = kth | (1u << bit);
    int32_t count = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const float x = row[i];
      count += x > -INFINITY && OrderedKey(x) >= trial;
    }
    if (BlockAllReduce(count, SumOp(), scratch) >= k) kth = trial;
  }
  return KeyToFloat(kth);
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_PRIMITIVES_FLOAT_KEY_CUH_
