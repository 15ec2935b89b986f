// Top-k, then top-p and min-p, on device rows of logits, the LightSeq way:
// no sort of the vocabulary. Each thread's strided slice of the row is a
// group; the k-th largest of the group maxima is a lower bound of the row's
// k-th largest logit (k groups each hold a value at least that large), so a
// second pass keeps only the logits at or above it — usually a few times k —
// and only those are sorted, in shared memory. When the bound keeps more
// than kTopKMaxCandidates (adversarial rows, or k beyond the number of
// groups), a bisection over the float bits finds the exact k-th value instead.
//
// Semantics are those of the CPU sampler (engine/sampling/logits_processor.h,
// candidate_list.h): ApplyTopK keeps every logit >= the k-th largest, so ties
// at the boundary all stay (NaN and -inf never count); the survivors in the
// canonical order (value descending, token ascending; +inf clamped to the
// largest float) become weights e^(l - max); top-p keeps the shortest head
// whose mass reaches top_p * total (at least one); min-p then keeps weights >=
// min_p * the largest. The kept set equals the CPU's; weights use expf (on a
// GPU within an ulp or two of the host's).
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_TOP_K_CUH_
#define TANDEM_KERNELS_CUDA_SAMPLING_TOP_K_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

// Most candidates a row may keep (the top-k set with its ties): the sort
// runs in shared memory. Also the largest k supported.
inline constexpr int32_t kTopKMaxCandidates = 2048;
// TopKRowResult::num_kept for a row whose top_k is outside [1,
// kTopKMaxCandidates]: the caller samples that row another way.
inline constexpr int32_t kTopKUnsupported = -1;
// TopKRowResult::num_kept for a row whose top-k set (with ties) has more than
// kTopKMaxCandidates tokens; num_top_k says how many.
inline constexpr int32_t kTopKOverflow = -2;

struct TopKRowParams {
  int32_t top_k = 1;   // in [1, kTopKMaxCandidates]
  float top_p = 1.0f;  // >= 1: off
  float min_p = 0.0f;  // <= 0: off
};

struct TopKRowResult {
  int32_t num_top_k = 0;  // size of the top-k set, ties included (0: no live logit)
  // Candidates kept after top-p and min-p, written first in `tokens` /
  // `weights`; 0 when the row has no live logit, else >= 1, or
  // kTopKUnsupported / kTopKOverflow.
  int32_t num_kept = 0;
  double weight_sum = 0.0;  // Σ of the kept weights: probability = weight / weight_sum
};

// All pointers are device memory.
struct TopKParams {
  const float* logits = nullptr;        // [num_rows, vocab_size], after penalties / temperature
  const TopKRowParams* rows = nullptr;  // [num_rows]
  int32_t* tokens = nullptr;            // [num_rows, kTopKMaxCandidates]: kept ids, canonical order
  float* weights = nullptr;             // [num_rows, kTopKMaxCandidates]: e^(logit - max logit)
  TopKRowResult* results = nullptr;     // [num_rows]
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
};

// Enqueues top-k, top-p and min-p for every row. INVALID_ARGUMENT naming
// the value for null pointers or sizes < 1; INTERNAL when the launch fails.
// Per-row problems are reported in the row's result, not here.
absl::Status TopKTopP(const TopKParams& params, cudaStream_t stream);

// The first `per_row` kept candidates of each row of a TopKTopP result, with
// their values in `logits` (the rows TopKTopP ranked; +inf as it is, not
// clamped): out_tokens[r, j] = tokens[r, j] and out_logits[r, j] =
// logits[r, tokens[r, j]] for j < min(per_row, results[r].num_kept); the
// rest of the row is token -1, logit NaN. All pointers are device memory;
// out_* are [num_rows, per_row]. INVALID_ARGUMENT naming the value for null
// pointers, sizes < 1 or per_row > kTopKMaxCandidates.
struct KeptCandidatesParams {
  const float* logits = nullptr;           // [num_rows, vocab_size]
  const int32_t* tokens = nullptr;         // TopKParams::tokens
  const TopKRowResult* results = nullptr;  // TopKParams::results
  int32_t* out_tokens = nullptr;
  float* out_logits = nullptr;
  int32_t per_row = 0;
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
};
absl::Status GatherKeptCandidates(const KeptCandidatesParams& params, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_TOP_K_CUH_
