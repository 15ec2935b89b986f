// VerifyKernel: one block per row. The acceptance test is one comparison;
// the residual needs the kept candidates in token order, which the block
// finds by ranking (each candidate's rank is the number of smaller ids:
// kept ids are distinct), after which one thread walks them with a running
// double sum, sequential on purpose to add in the CPU's order.
#include "kernels/cuda/sampling/verify_draft.cuh"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/counter_rng.h"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/cuda/sampling/draft_prob.cuh"

namespace tandem::cuda {
namespace {

constexpr int kVerifyThreads = 256;

// The residual draw over the n candidates sorted by token (thread 0 only):
// the token, or -1 when the residual has no mass.
__device__ int32_t DrawResidual(const int32_t* sorted_token, const double* sorted_residual, int n,
                                double u) {
  double mass = 0.0;
  for (int i = 0; i < n; ++i) mass += sorted_residual[i];
  if (!(mass > 0.0) || !isfinite(mass)) return -1;
  const double target = u * mass;
  double running = 0.0;
  int32_t drawn = -1;
  for (int i = 0; i < n; ++i) {
    if (sorted_residual[i] <= 0.0) continue;
    drawn = sorted_token[i];  // rounding may leave the walk short: the last one
    running += sorted_residual[i];
    if (running > target) break;
  }
  return drawn;
}

// max(0, p - q) of each kept candidate, stored at the candidate's rank in
// token order (block-strided; the caller synchronizes after).
__device__ void ResidualsInTokenOrder(const VerifyDraftParams& p, const VerifyDraftRowParams& row,
                                      const int32_t* kept_token, const float* weights, int n,
                                      double total, int32_t* sorted_token,
                                      double* sorted_residual) {
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const int32_t t = kept_token[j];
    int rank = 0;
    for (int i = 0; i < n; ++i) rank += kept_token[i] < t ? 1 : 0;
    const double residual =
        static_cast<double>(weights[j]) / total -
        static_cast<double>(DraftProb(row, p.support_tokens, p.support_probs, t));
    sorted_token[rank] = t;
    sorted_residual[rank] = residual > 0.0 ? residual : 0.0;  // NaN: no mass
  }
}

__global__ void __launch_bounds__(kVerifyThreads) VerifyKernel(VerifyDraftParams p) {
  __shared__ int32_t kept_token[kTopKMaxCandidates];
  __shared__ int32_t sorted_token[kTopKMaxCandidates];
  __shared__ double sorted_residual[kTopKMaxCandidates];
  __shared__ int32_t draft_index;
  const int32_t r = blockIdx.x;
  const VerifyDraftRowParams row = p.rows[r];
  const int32_t n = p.results[r].num_kept;
  if (row.draft < 0 || n <= 0) {  // the whole block
    if (threadIdx.x == 0) p.accepted[r] = 0;
    return;
  }
  const int64_t base = static_cast<int64_t>(r) * kTopKMaxCandidates;
  const float* weights = p.weights + base;
  if (threadIdx.x == 0) draft_index = -1;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    kept_token[j] = p.tokens[base + j];
    if (kept_token[j] == row.draft) draft_index = j;  // kept ids are distinct: one writer
  }
  __syncthreads();
  const double total = p.results[r].weight_sum;
  const double p_d = draft_index >= 0 ? static_cast<double>(weights[draft_index]) / total : 0.0;
  const double u = kernels::UniformDraw(row.seed, row.stream, row.step,
                                        kernels::DrawPurpose::kSpeculativeAccept);
  // u < p/q without the division (q(d) > 0); NaN compares false: rejected.
  if (u * static_cast<double>(row.q_draft) < p_d) {  // the same for every thread
    if (threadIdx.x == 0) {
      p.out_tokens[r] = row.draft;
      p.accepted[r] = 1;
    }
    return;
  }
  ResidualsInTokenOrder(p, row, kept_token, weights, n, total, sorted_token, sorted_residual);
  __syncthreads();
  if (threadIdx.x != 0) return;
  p.accepted[r] = 0;
  const int32_t drawn =
      DrawResidual(sorted_token, sorted_residual, n,
                   kernels::UniformDraw(row.seed, row.stream, row.step,
                                        kernels::DrawPurpose::kSpeculativeResidual));
  if (drawn >= 0) p.out_tokens[r] = drawn;  // else the Sampler's draw stands
}

}  // namespace

absl::Status VerifyDrafts(const VerifyDraftParams& params, cudaStream_t stream) {
  if (params.num_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("verify drafts: num_rows ", params.num_rows, " must be >= 1"));
  }
  if (params.tokens == nullptr || params.weights == nullptr || params.results == nullptr ||
      params.rows == nullptr || params.out_tokens == nullptr || params.accepted == nullptr) {
    return absl::InvalidArgumentError(
        "verify drafts: tokens, weights, results, rows, out_tokens and accepted must not be null");
  }
  TANDEM_LAUNCH(VerifyKernel, params.num_rows, kVerifyThreads, 0, stream, params);
  return LaunchStatus("VerifyKernel");
}

}  // namespace tandem::cuda
