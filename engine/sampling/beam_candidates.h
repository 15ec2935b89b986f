// Beam-search candidates of one logits row: instead of drawing a token, the
// worker returns the row's best next tokens with the scores transformers'
// beam search ranks them by (GenerationMixin._beam_search, 4.38-4.4x):
//   scores = log_softmax(raw logits)
//   processors on the scores: repetition penalty (HF), frequency/presence
//     penalties, min_tokens (EOS and stop ids -> -inf while too short)
//   warpers, only when beam sampling (do_sample): temperature, top-k, top-p,
//     min-p, each keeping at least 2 tokens as transformers does with beams
// Each candidate's `key` orders the selection: the score itself, or when
// sampling score + Gumbel noise from the counter RNG keyed by (seed, stream,
// step, token) — taking the best keys draws without replacement in
// proportion to exp(score), which the coordinator extends across beams by
// adding each beam's running score.
//
// Thread-safety: pure function of its arguments (scratch is the caller's).
#ifndef TANDEM_ENGINE_SAMPLING_BEAM_CANDIDATES_H_
#define TANDEM_ENGINE_SAMPLING_BEAM_CANDIDATES_H_

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling/sampler.h"

namespace tandem::sampling {

// Fills `out` with row.params->beam_candidates candidates (fewer when fewer
// tokens have a finite score; at least 1), sorted by key descending, ties
// by lower token id. `scores` ([vocab_size]) is overwritten; `seen` and
// `counts` ([vocab_size]) must be all zero and are again on return.
void ComputeBeamCandidates(const SamplingRow& row, std::span<float> scores,
                           std::span<uint8_t> seen, std::span<int32_t> counts,
                           std::vector<BeamToken>* out);

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_BEAM_CANDIDATES_H_
