// Block-wide all-reduce for kernels whose blockDim.x is a multiple of 32
// (and blockDim.y = blockDim.z = 1): a butterfly within each warp, then every
// thread combines the warp results in warp order, so all threads get the same
// bits and the result does not depend on the execution order.
#ifndef TANDEM_KERNELS_CUDA_PRIMITIVES_BLOCK_REDUCE_CUH_
#define TANDEM_KERNELS_CUDA_PRIMITIVES_BLOCK_REDUCE_CUH_

#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

inline constexpr int kMaxWarpsPerBlock = 32;

struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

struct MinOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// Butterfly reduction over the 32 lanes of the caller's warp (all lanes must
// call it); every lane gets the result.
template <typename T, typename Op>
__device__ T WarpAllReduce(T value, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Every thread of the block must call it (it has barriers). `scratch` is
// kMaxWarpsPerBlock elements of shared memory, which may be reused by the
// next call (the leading barrier keeps that call from overwriting warp
// results still being read).
template <typename T, typename Op>
__device__ T BlockAllReduce(T value, Op op, T* scratch) {
  value = WarpAllReduce(value, op);
  const int num_warps = static_cast<int>(blockDim.x) / 32;
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  T result = scratch[0];
  for (int w = 1; w < num_warps; ++w) result = op(result, scratch[w]);
  return result;
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_PRIMITIVES_BLOCK_REDUCE_CUH_
