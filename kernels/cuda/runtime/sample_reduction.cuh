// A block-wide float sum, the sample kernel of kernels/cuda: it shows a
// kernel written once for nvcc and the emulation (dynamic shared memory, a
// barrier-separated tree, a warp-shuffle tail), and it is what the build
// compiles with nvcc to prove the toolchain works.
#ifndef TANDEM_KERNELS_CUDA_RUNTIME_SAMPLE_REDUCTION_CUH_
#define TANDEM_KERNELS_CUDA_RUNTIME_SAMPLE_REDUCTION_CUH_

#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

// block_sums[b] = sum of in[i] over the i that block b's threads visit
// (grid-stride: i = b * blockDim.x + t + k * gridDim.x * blockDim.x, i < n).
// blockDim.x must be a power of two in [32, 1024], blockDim.y = blockDim.z = 1,
// and the launch must give blockDim.x floats of dynamic shared memory.
__global__ void BlockSumKernel(const float* __restrict__ in, float* __restrict__ block_sums, int n);

// Launches BlockSumKernel on `stream`: in[n] and block_sums[num_blocks] in
// device memory. cudaErrorInvalidValue when threads_per_block is not a power
// of two in [32, 1024] or num_blocks < 1; else the launch's error.
cudaError_t LaunchBlockSum(const float* in, float* block_sums, int n, int num_blocks,
                           int threads_per_block, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_RUNTIME_SAMPLE_REDUCTION_CUH_
