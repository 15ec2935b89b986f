// AddRmsNorm: one block per row. Each thread adds and squares a strided
// subset of the row, keeping the sums in registers; the block's total comes
// from a warp-shuffle reduction per warp, one shared slot per warp, and a
// second shuffle reduction that every warp performs (so all threads get the
// total without a second barrier). The scaling pass re-reads the elements
// the same thread wrote.
#include "kernels/cuda/layers/rms_norm.cuh"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The sum of v over the block, returned to every thread. blockDim.x is a
// multiple of 32 and at most 1024. Call at most once per kernel: a second
// call could overwrite the slots before a slow warp has read them.
__device__ float BlockSum(float v) {
  __shared__ float warp_sums[kWarpSize];  // [blockDim.x / 32]
  const unsigned lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = WarpSum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  return WarpSum(lane < blockDim.x / kWarpSize ? warp_sums[lane] : 0.0f);
}

// x, residual, out: [gridDim.x, dim]; weight: [dim]; residual may be null.
__global__ void AddRmsNormKernel(float* __restrict__ x, const float* __restrict__ residual,
                                 const float* __restrict__ weight, float* __restrict__ out,
                                 int64_t dim, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * dim;
  float* xr = x + row;
  float sum_sq = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    float v = xr[j];
    if (residual != nullptr) {
      v = __fadd_rn(v, residual[row + j]);
      xr[j] = v;
    }
    sum_sq = __fmaf_rn(v, v, sum_sq);
  }
  const float inv_rms = rsqrtf(BlockSum(sum_sq) / static_cast<float>(dim) + eps);
  float* o = out + row;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    // The reference's order: (x * inv_rms) * weight.
    o[j] = __fmul_rn(__fmul_rn(xr[j], inv_rms), weight[j]);
  }
}

}  // namespace

absl::Status AddRmsNorm(float* x, const float* residual, const float* weight, float* out,
                        const RmsNormParams& params, cudaStream_t stream) {
  if (params.dim < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("AddRmsNorm: dim %d < 1", params.dim));
  }
  if (params.num_rows < 0 || params.num_rows > kMaxGridX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("AddRmsNorm: num_rows %d outside [0, %d]", params.num_rows, kMaxGridX));
  }
  if (!(params.eps >= 0.0f)) {
    return absl::InvalidArgumentError(absl::StrFormat("AddRmsNorm: eps %g < 0", params.eps));
  }
  if (params.num_rows == 0) return absl::OkStatus();
  // Whole warps, no more than the row needs.
  const int threads = static_cast<int>(
      std::min<int64_t>(kMaxThreads, (params.dim + kWarpSize - 1) / kWarpSize * kWarpSize));
  TANDEM_LAUNCH(AddRmsNormKernel, static_cast<unsigned>(params.num_rows), threads, 0, stream, x,
                residual, weight, out, params.dim, params.eps);
  return LaunchStatus("AddRmsNormKernel");
}

}  // namespace tandem::cuda
