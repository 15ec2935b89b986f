// SiluMul: a grid-stride loop, one element per thread per step; the grid is
// capped so that large inputs reuse threads instead of launching more blocks
// than the GPU can hold at once.
#include "kernels/cuda/layers/silu_mul.cuh"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill an H100 (132 SMs x 8 resident blocks of 256).
constexpr int64_t kMaxBlocks = 1024;

// gate, up: [n].
__global__ void SiluMulKernel(float* __restrict__ gate, const float* __restrict__ up, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float g = gate[i];
    // The reference's operations and order: (g / (1 + e^-g)) · up. No
    // multiply feeds an add, so nvcc has nothing to contract into an FMA, and
    // '/' is IEEE division unless -use_fast_math.
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

}  // namespace

absl::Status SiluMul(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrFormat("SiluMul: n %d < 0", n));
  if (n == 0) return absl::OkStatus();
  const int64_t blocks = std::min<int64_t>(kMaxBlocks, (n + kThreads - 1) / kThreads);
  TANDEM_LAUNCH(SiluMulKernel, static_cast<unsigned>(blocks), kThreads, 0, stream, gate, up, n);
  return LaunchStatus("SiluMulKernel");
}

}  // namespace tandem::cuda
