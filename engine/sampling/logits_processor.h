// Logits processing for one row: the stages between the model's raw logits
// and the distribution a token is drawn from. The Sampler applies them in
// vLLM's v0 sampler order (vLLM v1 moved min-p ahead of top-k/top-p, and
// llama.cpp applies temperature last; min-p after truncation is the order
// this engine documents and tests):
//
//   1. min-tokens mask    MaskTokens: EOS / stop ids → -inf while too short
//   2. repetition penalty ApplyRepetitionPenalty  (prompt + generated, once per id)
//   3. frequency/presence ApplyFrequencyPresencePenalties (generated, by count)
//   4. temperature        ApplyTemperature (or, at temperature 0, Argmax → done)
//   5. top-k              ApplyTopK      on logits, ties at the k-th value kept
//   6. softmax            CandidateList::Reset (drops -inf) + ToWeights
//   7. top-p              ApplyTopP      smallest head with mass >= top_p
//   8. min-p              ApplyMinP      drop probability < min_p * max probability
//
// Stages 1-5 work in place on a float row [vocab_size]; 6-8 on a
// CandidateList built from it. Masking to -inf commutes with 2-4, so its place
// only matters for readability.
//
// Thread-safety: pure functions of their arguments; callers give each thread
// its own row and scratch.
#ifndef TANDEM_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
#define TANDEM_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "engine/sampling/candidate_list.h"

namespace tandem::sampling {

// The logit of a token that may not be drawn.
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// log_softmax at a raw logit given its row's normalizer (the row's largest
// logit `max` and sum = Σ e^(l - max), kernels::SoftmaxNormalizer):
// logit - (max + log(sum)) in double, NaN counting as -inf. The logprob the
// Sampler reports, on the host or from a device's normalizer.
float RawLogprob(float logit, float max, double sum);

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

// Sets to -inf every logit below the k-th largest (so ties at the boundary
// all stay, as in vLLM); NaN and -inf never count among the k. No-op for
// k <= 0 or fewer than k+1 live logits. O(vocab): a size-k min-heap pass for
// small k (a few compares per logit), nth_element on a copy otherwise; no
// sort. `scratch` is reused working memory.
void ApplyTopK(int32_t k, std::span<float> logits, std::vector<float>* scratch);

// Nucleus filter over weights (call after ToWeights): keeps the shortest head
// of the canonical order whose mass reaches top_p * total, i.e. a candidate
// stays iff the mass strictly before it is < top_p * total (the best one
// always stays). Expected O(size), no full sort. No-op for top_p >= 1.
void ApplyTopP(float top_p, CandidateList* candidates);

// Keeps the candidates whose weight is >= min_p * (largest weight), which is
// the same cut on normalized probabilities. No-op for min_p <= 0. Call after
// ToWeights.
void ApplyMinP(float min_p, CandidateList* candidates);

// Inverse-CDF draw: returns the token at which the running weight, walking
// the candidates in canonical order, first exceeds u * total, u in [0, 1).
// Expected O(size) (CandidateList::FindMassCrossing). Rounding that leaves the
// walk short picks the last candidate of positive weight. Requires a
// non-empty list (CHECK).
int32_t DrawInverseCdf(double u, CandidateList* candidates);

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_LOGITS_PROCESSOR_H_
