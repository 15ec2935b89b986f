#include "kernels/cuda/runtime/sample_reduction.cuh"

namespace tandem::cuda {

__global__ void BlockSumKernel(const float* __restrict__ in, float* __restrict__ block_sums,
                               int n) {
  TANDEM_DYNAMIC_SHARED(float, partial);  // [blockDim.x]
  const unsigned tid = threadIdx.x;
  float sum = 0.0f;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + tid; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    sum += in[i];
  }
  partial[tid] = sum;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride >= warpSize; stride /= 2) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  if (tid < warpSize) {
    float v = partial[tid];
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
      v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    if (tid == 0) block_sums[blockIdx.x] = v;
  }
}

cudaError_t LaunchBlockSum(const float* in, float* block_sums, int n, int num_blocks,
                           int threads_per_block, cudaStream_t stream) {
  const bool power_of_two = (threads_per_block & (threads_per_block - 1)) == 0;
  if (threads_per_block < 32 || threads_per_block > 1024 || !power_of_two || num_blocks < 1) {
    return cudaErrorInvalidValue;
  }
  TANDEM_LAUNCH(BlockSumKernel, num_blocks, threads_per_block, threads_per_block * sizeof(float),
                stream, in, block_sums, n);
  return cudaGetLastError();
}

}  // namespace tandem::cuda
