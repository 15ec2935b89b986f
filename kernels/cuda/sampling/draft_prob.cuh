// q(t), the probability a speculative draft's distribution gives token t,
// from a VerifyDraftRowParams (verify_draft.cuh) and the call's sorted
// supports: q(draft) = q_draft, else the support's probability at t, else 0.
// Device code for the verification kernels (verify_draft.cu, vocab_draw.cu).
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_DRAFT_PROB_CUH_
#define TANDEM_KERNELS_CUDA_SAMPLING_DRAFT_PROB_CUH_

#include <cstdint>

#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/cuda/sampling/verify_draft.cuh"

namespace tandem::cuda {

// Binary search of the row's support [support_begin, + support_len), sorted
// by token, each token once.
__device__ __forceinline__ float DraftProb(const VerifyDraftRowParams& row,
                                           const int32_t* support_tokens,
                                           const float* support_probs, int32_t t) {
  if (t == row.draft) return row.q_draft;
  int lo = 0;
  int hi = row.support_len;
  const int32_t* tokens = support_tokens + row.support_begin;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (tokens[mid] < t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < row.support_len && tokens[lo] == t ? support_probs[row.support_begin + lo] : 0.0f;
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_DRAFT_PROB_CUH_
