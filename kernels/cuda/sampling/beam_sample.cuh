// Beam sampling's candidates on the device: the selection
// engine/sampling/beam_candidates.h makes when beam_sample is set, on rows
// already holding the processed scores (log_softmax, penalties, the
// min-tokens mask, temperature):
//   1. BeamSampleKeys: the warpers' kept set, and each kept token's key =
//      score + kernels::GumbelNoise(seed, stream, step, token); other
//      tokens' keys are -inf. The kept set: with top_k in [1,
//      kTopKMaxCandidates], TopKTopP's kept list for k = max(top_k, 2)
//      (top-p and min-p off there) cut by kernels::BeamNucleusSize, the
//      CPU's operations in its order; otherwise the whole row's candidates
//      (finite scores, >= the k-th largest under top-k, ties kept) cut by
//      top-p and min-p as VocabDraw cuts them (vocab_candidates.cuh: the
//      first candidate, weight descending then token ascending, at which
//      the running mass reaches top_p * Σ, then weights >= min_p); when
//      that keeps fewer than two, the first two by score, as the CPU. Those
//      sums run in tree order, not the CPU's (whose tail walk is
//      mathematically the same cut), and order equal weights by token where
//      the CPU orders by score, so the kept set can differ only where top_p
//      * Σ falls within rounding of a boundary or the cut falls among
//      distinct scores whose weights round to the same float.
//   2. TopKTopP over the keys (k = the row's beam_candidates, top-p off): the
//      best keys, ties by lower id, as the CPU's selection.
//   3. GatherBeamSamples: the first beam_candidates of those with their
//      scores and keys, and the best as the row's token.
// The float and double operations are the CPU's, in its order (the
// weights' expf and the Gumbel log aside: see top_k.cuh, beam_sampling.h).
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_BEAM_SAMPLE_CUH_
#define TANDEM_KERNELS_CUDA_SAMPLING_BEAM_SAMPLE_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/cuda/sampling/top_k.cuh"

namespace tandem::cuda {

struct BeamSampleRowParams {
  int32_t row = 0;         // the row of `scores` and of the warpers' kept lists
  bool kept_list = false;  // TopKTopP's kept list holds the top-k set (else the whole row)
  int32_t top_k = 0;       // whole-row rows: <= 0 off
  float top_p = 1.0f;      // >= 1: off
  float min_p = 0.0f;      // <= 0: off
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t step = 0;     // the output position being drawn
};

// All pointers are device memory. Row j of `keys` belongs to rows[j].
struct BeamSampleKeysParams {
  const float* scores = nullptr;               // [*, vocab_size] processed scores
  const BeamSampleRowParams* rows = nullptr;   // [num_rows]
  // TopKTopP's result for the rows of `scores` (read for kept_list rows): a
  // row without kept candidates keeps nothing.
  const int32_t* kept_tokens = nullptr;        // [*, kTopKMaxCandidates]
  const float* kept_weights = nullptr;         // [*, kTopKMaxCandidates]
  const TopKRowResult* kept_results = nullptr;  // [*]
  float* keys = nullptr;                       // [num_rows, vocab_size]
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
};

// Enqueues the keys of every row. INVALID_ARGUMENT naming the value for
// null pointers or sizes < 1; INTERNAL when the launch fails.
absl::Status BeamSampleKeys(const BeamSampleKeysParams& params, cudaStream_t stream);

// After TopKTopP over `keys` (key_*), for j < num_rows and r = rows[j].row:
// out_*[r, i] for i < per_row = the i-th best key's token, its score and its
// key (token -1, NaN past the kept ones); tokens[r] the best key's token, or
// kNoDraw when none is kept (no finite score, the warpers' top-k set past
// the candidate kernel, or more than kTopKMaxCandidates keys tied into the
// top set).
struct BeamSampleGatherParams {
  const float* scores = nullptr;               // BeamSampleKeysParams::scores
  const float* keys = nullptr;                 // BeamSampleKeysParams::keys
  const BeamSampleRowParams* rows = nullptr;   // [num_rows]
  const int32_t* key_tokens = nullptr;         // [num_rows, kTopKMaxCandidates]
  const TopKRowResult* key_results = nullptr;  // [num_rows]
  int32_t* out_tokens = nullptr;               // [*, per_row]
  float* out_scores = nullptr;                 // [*, per_row]
  float* out_keys = nullptr;                   // [*, per_row]
  int32_t* tokens = nullptr;                   // [*]
  int32_t per_row = 0;
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
};

// INVALID_ARGUMENT naming the value for null pointers, sizes < 1 or per_row
// > kTopKMaxCandidates; INTERNAL when the launch fails.
absl::Status GatherBeamSamples(const BeamSampleGatherParams& params, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_BEAM_SAMPLE_CUH_
