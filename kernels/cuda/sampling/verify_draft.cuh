// Speculative verification of one drafted token per row, on the device: the
// decision engine/sampling/speculative_verifier.h makes at one position of a
// sampling row, after TopKTopP (top_k.cuh) has left the row's processed
// distribution p as kept candidates (canonical order, weights, weight_sum)
// and DrawTokens (sample_draw.cuh) the Sampler's own draw there:
//   p(d) = weight(d) / weight_sum (0 when d was cut), q(d) the draft's;
//   accept d iff u * q(d) < p(d), u = UniformDraw(seed, stream, step,
//   kSpeculativeAccept);
//   else draw from max(0, p - q) by inverse CDF over token ids ascending
//   (running sum in double, as the CPU's residual walk) with u' =
//   UniformDraw(..., kSpeculativeResidual); with no residual mass the
//   Sampler's draw stands.
// The same float and double operations as the CPU verifier, in the same
// order, so a row's verdict and token equal the CPU's bit for bit (the
// weights' expf aside: see top_k.cuh).
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_VERIFY_DRAFT_CUH_
#define TANDEM_KERNELS_CUDA_SAMPLING_VERIFY_DRAFT_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/cuda/sampling/top_k.cuh"

namespace tandem::cuda {

// One row's draft. The draft's support lies in VerifyDraftParams::support_*
// at [support_begin, support_begin + support_len), sorted by token, each
// token once; q(t) is its probability there (0 off the support), except
// q(draft) = q_draft. support_len 0: q is one-hot at the draft (q_draft 1).
struct VerifyDraftRowParams {
  int32_t draft = -1;  // < 0: the row verifies nothing and is left as drawn
  float q_draft = 1.0f;
  int32_t support_begin = 0;
  int32_t support_len = 0;
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t step = 0;  // the draft's output position (tokens before it)
};

// All pointers are device memory; tokens / weights / results are TopKTopP's
// for the rows (sampling rows: not run with k 1 for greedy, which the caller
// verifies by comparing DrawTokens' argmax with the draft).
struct VerifyDraftParams {
  const int32_t* tokens = nullptr;         // [num_rows, kTopKMaxCandidates]
  const float* weights = nullptr;          // [num_rows, kTopKMaxCandidates]
  const TopKRowResult* results = nullptr;  // [num_rows]
  const VerifyDraftRowParams* rows = nullptr;
  const int32_t* support_tokens = nullptr;  // the rows' supports (may be null if all empty)
  const float* support_probs = nullptr;
  // [num_rows] DrawTokens' tokens: replaced by the draft when accepted, by
  // the residual draw when rejected (kept when the residual has no mass).
  // Rows without a draft or without kept candidates are untouched.
  int32_t* out_tokens = nullptr;
  int32_t* accepted = nullptr;  // [num_rows]: 1 accepted, else 0
  int32_t num_rows = 0;
};

// Enqueues the verification of every row. INVALID_ARGUMENT naming the value
// for null pointers or num_rows < 1; INTERNAL when the launch fails.
absl::Status VerifyDrafts(const VerifyDraftParams& params, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_VERIFY_DRAFT_CUH_
