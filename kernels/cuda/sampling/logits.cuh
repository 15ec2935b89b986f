// Logits processing on device rows [num_rows, vocab_size]: the stages of
// engine/sampling/logits_processor.h that work on a whole row, with the same
// semantics and order — repetition penalty (prompt + output ids, once per
// distinct id), then frequency / presence penalties (output ids, by count),
// then temperature — plus min-p and the log-softmax normalizer. Top-k and
// top-p are top_k.cuh.
//
// Numerics: every stage performs the CPU code's float operations (divisions
// and one product and sum per penalty, never fused), so results are
// bit-identical to the CPU's; min-p and the normalizer use expf, which on a
// GPU may differ from the host's by an ulp or two.
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_LOGITS_CUH_
#define TANDEM_KERNELS_CUDA_SAMPLING_LOGITS_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

// One row's sampling parameters and its token ids (ranges of
// LogitsPenaltyParams::token_ids).
struct LogitsRowParams {
  float repetition_penalty = 1.0f;  // 1: off (HF / vLLM: logit > 0 ? l / p : l * p)
  float frequency_penalty = 0.0f;   // logit -= frequency * count + presence, output ids only
  float presence_penalty = 0.0f;
  // Logits are divided by it when > 0 and != 1 (as the CPU sampler does);
  // greedy rows pass 1.
  float temperature = 1.0f;
  int32_t prompt_begin = 0;
  int32_t prompt_len = 0;
  int32_t output_begin = 0;
  int32_t output_len = 0;
};

// All pointers are device memory.
struct LogitsPenaltyParams {
  float* logits = nullptr;                // [num_rows, vocab_size], processed in place
  const LogitsRowParams* rows = nullptr;  // [num_rows]
  // The ids the rows' ranges refer to, each in [0, vocab_size) (validated
  // upstream as on the CPU; an id out of range is skipped).
  const int32_t* token_ids = nullptr;
  // LogitsPenaltyWorkspaceBytes(num_rows, vocab_size) bytes, all zero on
  // entry (cudaMemset once); the kernel leaves them zero again, like the CPU
  // stages' `seen` and `counts` scratch.
  int32_t* workspace = nullptr;
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
};

// [num_rows, 2, vocab_size] int32: per row, seen flags and output counts.
int64_t LogitsPenaltyWorkspaceBytes(int32_t num_rows, int32_t vocab_size);

// Enqueues ApplyRepetitionPenalty, ApplyFrequencyPresencePenalties and
// ApplyTemperature (engine/sampling/logits_processor.h), in that order, on
// every row. INVALID_ARGUMENT naming the value for null pointers or sizes
// < 1; INTERNAL when the launch fails.
absl::Status ApplyPenaltiesAndTemperature(const LogitsPenaltyParams& params, cudaStream_t stream);

// Min-p on whole rows: logits[r, i] = -inf where e^(l - max_r) < min_p[r],
// max_r the row's largest logit (NaN and -inf are not candidates; +inf counts
// as the largest finite float, as CandidateList::Reset clamps it); rows with
// min_p[r] <= 0 are untouched. This is ApplyMinP on CandidateList::Reset(row)
// after ToWeights, so it belongs after top-k / top-p truncation (or where
// there is none). logits [num_rows, vocab_size], min_p [num_rows], device.
absl::Status ApplyMinP(float* logits, const float* min_p, int32_t num_rows, int32_t vocab_size,
                       cudaStream_t stream);

// As kernels::SoftmaxNormalizer: max = the largest logit (NaN counts as -inf;
// -inf when all are), sum = Σ e^(l - max) in double (0 when max is not
// finite); log_softmax(l)_i = l_i - (max + log(sum)).
struct LogSoftmaxNormalizerResult {
  float max = 0.0f;
  double sum = 0.0;
};

// out[r] = the normalizer of row r. logits [num_rows, vocab_size], out
// [num_rows], device. INVALID_ARGUMENT for null pointers or sizes < 1.
absl::Status LogSoftmaxNormalizers(const float* logits, int32_t num_rows, int32_t vocab_size,
                                   LogSoftmaxNormalizerResult* out, cudaStream_t stream);

// log_softmax in place on rows[0..count) of `logits`, as the CPU's beam
// candidates take it (beam_candidates.cc): when the row's max (norms[r]) is
// finite, l = float(double(l) - (max + log(sum))); a row holding a NaN
// becomes all NaN there (its double sum is NaN); a row whose max is not
// finite (all -inf / NaN, or a +inf) is left as it is. `norms` are
// LogSoftmaxNormalizers of the same rows. logits [*, vocab_size], norms
// [*], rows [count], device. count 0 launches nothing. INVALID_ARGUMENT for
// null pointers, count < 0 or vocab_size < 1.
absl::Status LogSoftmaxRows(float* logits, const LogSoftmaxNormalizerResult* norms,
                            const int32_t* rows, int32_t count, int32_t vocab_size,
                            cudaStream_t stream);
// logits[positions[i]] = -inf for i < count: MaskTokens (the min-tokens
// mask) over a batch, positions flat indices into [num_rows, vocab_size]
// (row * vocab_size + id), device memory. count 0 launches nothing.
// INVALID_ARGUMENT for null pointers or count < 0.
absl::Status MaskLogits(float* logits, const int64_t* positions, int32_t count,
                        cudaStream_t stream);

// out[r] = logits[r, tokens[r]], NaN where tokens[r] is outside [0,
// vocab_size). logits [num_rows, vocab_size], tokens and out [num_rows],
// device. INVALID_ARGUMENT for null pointers or sizes < 1.
absl::Status GatherLogits(const float* logits, const int32_t* tokens, int32_t num_rows,
                          int32_t vocab_size, float* out, cudaStream_t stream);

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_LOGITS_CUH_
