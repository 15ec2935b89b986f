// Sampling a token over a whole vocabulary row on the device, for the rows
// the candidate kernel (TopKTopP, top_k.cuh) cannot hold: top-k off or above
// kTopKMaxCandidates. Nothing is sorted or collected: the candidates are the
// live logits (not NaN, not -inf; with top-k, those >= the k-th largest, ties
// kept), weights e^(l - max) (+inf counts as the largest float), and every
// cut is a position in the canonical order (weight descending, token
// ascending) found by bisection over the weights' float bits with block-wide
// sums, then among the ties at that weight in token order:
//   top-p  the first candidate at which the running mass reaches top_p * Σ
//   min-p  weights >= min_p (the largest weight is 1)
//   draw   u = UniformDraw(seed, stream, step) (kernels/counter_rng.h), the
//          first kept candidate at which the running mass exceeds u * Σ kept;
//          if rounding leaves it short, the last kept candidate of positive
//          weight.
// These are the CPU sampler's stages 5-8 and DrawInverseCdf
// (engine/sampling/logits_processor.h). The sums run in a fixed tree order,
// not the CPU's, so the two can differ only where u * Σ (or top_p * Σ) falls
// within rounding of a boundary; on one backend a row's token depends only on
// its logits, parameters and counter, never on the batch around it.
//
// Speculative verification (rows with a draft in VocabDrawParams::verify):
// the decision of verify_draft.cuh over this kept set — p(d) = weight(d) /
// Σ kept (0 when d was cut), accept d iff u * q(d) < p(d), else the residual
// draw over max(0, p - q) by inverse CDF over token ids ascending, else (no
// residual mass) the draw above. The residual's sums run chunk by chunk
// (blockDim tokens, a tree sum each, chunks in token order) and the chunk
// where the walk crosses is walked token by token as the CPU does, so the
// token differs from the CPU's only where u' * mass falls within rounding of
// a boundary.
//
// Cost: about 130 block-wide passes over the row (two 30-step bisections
// over weights, two over token ids, one over logits with top-k); a rejected
// draft adds two or three more, each with a binary search of the support
// per token.
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_VOCAB_DRAW_CUH_
#define TANDEM_KERNELS_CUDA_SAMPLING_VOCAB_DRAW_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/cuda/sampling/sample_draw.cuh"
#include "kernels/cuda/sampling/verify_draft.cuh"

namespace tandem::cuda {

struct VocabDrawRowParams {
  int32_t top_k = 0;   // <= 0 or >= vocab_size: off
  float top_p = 1.0f;  // >= 1: off
  float min_p = 0.0f;  // <= 0: off
  DrawRowParams draw;  // `argmax` is not supported here (greedy rows go through TopKTopP)
  bool skip = false;   // leave out_tokens[r] as it is (a row another kernel draws)
};

// All pointers are device memory.
struct VocabDrawParams {
  const float* logits = nullptr;              // [num_rows, vocab_size], after penalties / temperature
  const VocabDrawRowParams* rows = nullptr;   // [num_rows]
  int32_t* out_tokens = nullptr;              // [num_rows]: the token, or kNoDraw (no live logit)
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
  // Speculative verification; null when no row verifies. verify[r].draft
  // >= 0: row r verifies that draft (out_tokens[r] is the emitted token,
  // accepted[r] 1 or 0); supports as VerifyDraftParams's.
  const VerifyDraftRowParams* verify = nullptr;  // [num_rows]
  const int32_t* support_tokens = nullptr;
  const float* support_probs = nullptr;
  int32_t* accepted = nullptr;  // [num_rows]; required with verify
};

// Enqueues one draw (or verification) per row. INVALID_ARGUMENT naming the
// value for null pointers (accepted with verify) or sizes < 1; INTERNAL
// when the launch fails.
absl::Status VocabDraw(const VocabDrawParams& params, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_VOCAB_DRAW_CUH_
