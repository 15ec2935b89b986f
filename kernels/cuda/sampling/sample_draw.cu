// DrawKernel: one thread per row. A row's walk is sequential on purpose: the
// running sum must add the weights in the canonical order, in double, as the
// CPU's does, for the two to pick the same token at a boundary; at most
// kTopKMaxCandidates additions, small beside a decode step.
#include "kernels/cuda/sampling/sample_draw.cuh"

#include "absl/strings/str_cat.h"
#include "kernels/counter_rng.h"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

constexpr int kDrawThreads = 128;

__device__ int32_t DrawRow(const int32_t* tokens, const float* weights, int32_t num_kept,
                           double weight_sum, double u) {
  const double target = u * weight_sum;
  double mass = 0.0;
  for (int32_t i = 0; i < num_kept; ++i) {
    mass += weights[i];
    if (mass > target) return tokens[i];
  }
  // Rounding left the walk short: the canonically last positive weight (the
  // list is in the canonical order, weights descending).
  for (int32_t i = num_kept - 1; i >= 0; --i) {
    if (weights[i] > 0.0f) return tokens[i];
  }
  return tokens[0];
}

__global__ void __launch_bounds__(kDrawThreads) DrawKernel(DrawParams p) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= p.num_rows) return;
  const TopKRowResult result = p.results[r];
  if (result.num_kept <= 0) {
    p.out_tokens[r] = kNoDraw;
    return;
  }
  const DrawRowParams row = p.rows[r];
  const int64_t base = r * kTopKMaxCandidates;
  if (row.argmax) {
    p.out_tokens[r] = p.tokens[base];
    return;
  }
  p.out_tokens[r] =
      DrawRow(p.tokens + base, p.weights + base, result.num_kept, result.weight_sum,
              kernels::UniformDraw(row.seed, row.stream, row.step));
}

}  // namespace

absl::Status DrawTokens(const DrawParams& params, cudaStream_t stream) {
  if (params.num_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("draw: num_rows ", params.num_rows, " must be >= 1"));
  }
  if (params.tokens == nullptr || params.weights == nullptr || params.results == nullptr ||
      params.rows == nullptr || params.out_tokens == nullptr) {
    return absl::InvalidArgumentError(
        "draw: tokens, weights, results, rows and out_tokens must not be null");
  }
  const int blocks = (params.num_rows + kDrawThreads - 1) / kDrawThreads;
  TANDEM_LAUNCH(DrawKernel, blocks, kDrawThreads, 0, stream, params);
  return LaunchStatus("DrawKernel");
}

}  // namespace tandem::cuda
