// Logits processing for one row: the stages between the model's raw logits
// and the distribution a token is drawn from. The Sampler applies them in
// vLLM's order (v0 sampler; also llama.cpp's default chain minus typical-p):
//
//   1. min-tokens mask    MaskTokens: EOS / stop ids → -inf while too short
//   2. repetition penalty ApplyRepetitionPenalty  (prompt + generated, once per id)
//   3. frequency/presence ApplyFrequencyPresencePenalties (generated, by count)
//   4. temperature        ApplyTemperature (or, at temperature 0, Argmax → done)
//   5. top-k              ApplyTopK      on logits, ties at the k-th value kept
//   6. softmax            CandidateList::ToWeights
//   7. top-p              ApplyTopP      smallest head with mass >= top_p
//   8. min-p              ApplyMinP      drop probability < min_p * max probability
//
// Stages 1-4 work in place on a float row [vocab_size]; 5-8 on a
// CandidateList built from it. Masking to -inf commutes with 2-4, so its place
// only matters for readability.
//
// Thread-safety: pure functions of their arguments; callers give each thread
// its own row and scratch.
#ifndef TANDEM_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
#define TANDEM_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_

#include <cstdint>
#include <span>

#include "engine/sampling/candidate_list.h"

namespace tandem::sampling {

// Sets logits[id] = -inf for each id. Ids must be in [0, logits.size())
// (CHECK: they were validated against the vocabulary upstream).
void MaskTokens(std::span<float> logits, std::span<const int32_t> ids);

// HF / vLLM repetition penalty: every distinct id occurring in `prompt_tokens`
// or `output_tokens` gets logit / penalty if the logit is > 0, else logit *
// penalty, applied once however often it occurs. `seen` ([vocab_size]) is
// scratch that must be all zero on entry and is all zero again on return.
// No-op when penalty == 1. Ids out of range CHECK-fail.
void ApplyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> prompt_tokens,
                            std::span<const int32_t> output_tokens, float penalty,
                            std::span<uint8_t> seen);

// OpenAI / vLLM additive penalties over generated tokens: logit[id] -=
// frequency * count(id) + presence * (count(id) > 0). `counts` ([vocab_size])
// is scratch, all zero on entry and on return. No-op when both are 0.
void ApplyFrequencyPresencePenalties(std::span<float> logits, std::span<const int32_t> output_tokens,
                                     float frequency_penalty, float presence_penalty,
                                     std::span<int32_t> counts);

// Divides every logit by `temperature` (> 0, CHECK).
void ApplyTemperature(std::span<float> logits, float temperature);

// Index of the largest logit, the lowest index among equals; NaN is never
// chosen. Returns -1 when every logit is -inf or NaN.
int32_t Argmax(std::span<const float> logits);

// Keeps the candidates whose logit is >= the k-th largest logit (so ties at
// the boundary all stay, as in vLLM). No-op for k <= 0 or k >= size. Costs
// O(size) (nth_element), not a sort. Call before ToWeights.
void ApplyTopK(int32_t k, CandidateList* candidates);

// Nucleus filter over weights (call after ToWeights): keeps the shortest head
// of the canonical order whose mass reaches top_p * total, i.e. a candidate
// stays iff the mass strictly before it is < top_p * total (the best one
// always stays). Sorts only as much of the head as it walks. No-op for
// top_p >= 1. Leaves the whole surviving list sorted.
void ApplyTopP(float top_p, CandidateList* candidates);

// Keeps the candidates whose weight is >= min_p * (largest weight), which is
// the same cut on normalized probabilities. No-op for min_p <= 0. Call after
// ToWeights.
void ApplyMinP(float min_p, CandidateList* candidates);

// Inverse-CDF draw: walks the candidates in canonical order (sorting lazily)
// and returns the token at which the running weight first exceeds u * total,
// u in [0, 1). Rounding that leaves the walk short picks the last candidate of
// positive weight. Requires a non-empty list (CHECK).
int32_t DrawInverseCdf(double u, CandidateList* candidates);

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
