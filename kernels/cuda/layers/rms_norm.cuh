// RMSNorm fused with the residual add on the GPU: the pre-attention and
// pre-FFN step of a llama layer in one pass over the residual stream.
#ifndef TANDEM_KERNELS_CUDA_LAYERS_RMS_NORM_CUH_
#define TANDEM_KERNELS_CUDA_LAYERS_RMS_NORM_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

struct RmsNormParams {
  int64_t num_rows = 0;  // tokens
  int64_t dim = 0;       // hidden size
  float eps = 1e-5f;
};

// For each row i (all pointers to device memory, rows contiguous):
//   x[i, :] += residual[i, :]   (skipped when residual is null)
//   out[i, :] = x[i, :] / sqrt(mean(x[i, :]²) + eps) * weight
// x, residual, out: [num_rows, dim]; weight: [dim]. out must not overlap x.
// The updated x has the bits of kernels::Add; out matches kernels::RmsNorm
// of the updated x within a relative 1e-5 (a tree-ordered sum of squares
// and rsqrtf instead of the reference's sequential sum and 1 / sqrt).
// Runs asynchronously on `stream`. INVALID_ARGUMENT for dim < 1, num_rows
// outside [0, 2^31) or eps < 0; INTERNAL when the launch fails.
absl::Status AddRmsNorm(float* x, const float* residual, const float* weight, float* out,
                        const RmsNormParams& params, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_LAYERS_RMS_NORM_CUH_
