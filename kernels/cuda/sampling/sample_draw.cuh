// The draw of device sampling: after TopKTopP (top_k.cuh) has left each
// row's kept candidates in the canonical order with their weights, each row
// draws one token by inverse CDF with the counter RNG (kernels/counter_rng.h):
// u = UniformDraw(seed, stream, step), target = u * weight_sum, and the
// token is the first candidate whose running weight sum (in double, in the
// canonical order) exceeds target; when rounding leaves the walk short (u
// within an ulp of 1), the last candidate of positive weight. That is the
// CPU sampler's DrawInverseCdf (engine/sampling/logits_processor.h) on the
// same list, so a row's token depends only on its logits, parameters and
// (seed, stream, step): never on the batch around it.
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_SAMPLE_DRAW_CUH_
#define TANDEM_KERNELS_CUDA_SAMPLING_SAMPLE_DRAW_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "kernels/cuda/sampling/top_k.cuh"

namespace tandem::cuda {

// DrawParams::out_tokens for a row with nothing to draw from: its TopKTopP
// result kept no candidate (no live logit; the CPU then takes the raw
// argmax) or was kTopKUnsupported / kTopKOverflow (sampled another way).
inline constexpr int32_t kNoDraw = -1;

// The counter of one row's draw: `step` is the number of tokens the sequence
// generated before this one, `stream` its sample index (n > 1).
struct DrawRowParams {
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t step = 0;
  // Greedy: the canonically first candidate (the largest logit, the lowest
  // id among ties; run TopKTopP with top_k 1), no draw.
  bool argmax = false;
};

// All pointers are device memory; tokens / weights / results are TopKTopP's.
struct DrawParams {
  const int32_t* tokens = nullptr;      // [num_rows, kTopKMaxCandidates]
  const float* weights = nullptr;       // [num_rows, kTopKMaxCandidates]
  const TopKRowResult* results = nullptr;  // [num_rows]
  const DrawRowParams* rows = nullptr;  // [num_rows]
  int32_t* out_tokens = nullptr;        // [num_rows]: the token, or kNoDraw
  int32_t num_rows = 0;
};

// Enqueues one draw per row. INVALID_ARGUMENT naming the value for null
// pointers or num_rows < 1; INTERNAL when the launch fails.
absl::Status DrawTokens(const DrawParams& params, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_SAMPLE_DRAW_CUH_
