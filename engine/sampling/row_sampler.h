// RowSampler: the Sampler's work on one logits row (processing, the draw,
// logprobs) together with the vocabulary-sized working memory it needs. The
// Sampler keeps one per pool thread and runs Sample on each row; the
// speculative verifier keeps its own and uses the same pieces
// (ProcessedCandidates, ComputeLogprobs) so that verification sees exactly
// the distribution a plain step would draw from. The row semantics are
// documented in sampler.h.
//
// Thread-safety: none; one thread uses a RowSampler at a time.
#ifndef TANDEM_ENGINE_SAMPLING_ROW_SAMPLER_H_
#define TANDEM_ENGINE_SAMPLING_ROW_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "engine/sampling/candidate_list.h"
#include "engine/sampling/sampler.h"
#include "kernels/kernels.h"

namespace tandem::sampling {

class RowSampler {
 public:
  // `vocab_size` >= 1 (CHECK): the length of every logits row.
  explicit RowSampler(int32_t vocab_size);

  int32_t vocab_size() const { return vocab_size_; }

  // One row of Sampler::SampleBatch: the token (or beam candidates), its raw
  // logprob and the top logprobs. CHECK-fails on a null logits/params
  // pointer or a history token outside [0, vocab_size).
  void Sample(const SamplingRow& row, SampleResult* result);

  // For a sampling row (temperature >= kGreedyTemperature, beam_candidates
  // == 0): runs stages 1-8 of logits_processor.h and returns the candidates
  // Sample would draw from; a candidate's probability is value / Sum(). Null
  // when nothing survives the processing (Sample then falls back to the raw
  // argmax). The list is valid until the next call on this RowSampler.
  const CandidateList* ProcessedCandidates(const SamplingRow& row);

  // Sets result->logprob and result->top_logprobs for result->token from the
  // raw logits of `row` (log_softmax; params->logprobs alternatives).
  void ComputeLogprobs(const SamplingRow& row, SampleResult* result);
  // The same for `logits` (raw, [vocab_size]) with `num_top` alternatives.
  void ComputeLogprobs(const float* logits, int32_t num_top, SampleResult* result);

 private:
  // Stages 1-3 (min-tokens mask, penalties) on a copy of the row in logits_.
  void ApplyPenalties(const SamplingRow& row);
  // Stages 4-8 on logits_ into candidates_; null when nothing survives.
  CandidateList* Truncate(const SamplingParams& p);

  int32_t vocab_size_;
  kernels::Isa isa_;  // of the log-softmax normalizer (kernels::BestIsa())
  std::vector<float> logits_;       // [vocab_size] processed copy of the row
  std::vector<uint8_t> seen_;       // [vocab_size] all zero between uses
  std::vector<int32_t> counts_;     // [vocab_size] all zero between uses
  std::vector<int32_t> token_ids_;  // [vocab_size] for top-logprob selection
  std::vector<float> top_k_;        // ApplyTopK's working memory
  CandidateList candidates_;
};

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_ROW_SAMPLER_H_
