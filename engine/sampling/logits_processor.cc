#include "engine/sampling/logits_processor.h"

#include <cmath>
#include <cstddef>
#include <limits>

#include "common/logging.h"

namespace tandem::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline void CheckToken(int32_t id, size_t vocab_size) {
  CHECK(id >= 0 && static_cast<size_t>(id) < vocab_size, "token id %d is out of range [0, %zu)",
        id, vocab_size);
}

inline void PenalizeOnce(std::span<float> logits, int32_t id, float penalty,
                         std::span<uint8_t> seen) {
  CheckToken(id, logits.size());
  if (seen[id]) return;
  seen[id] = 1;
  float& l = logits[id];
  l = l > 0.0f ? l / penalty : l * penalty;
}

}  // namespace

void MaskTokens(std::span<float> logits, std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    CheckToken(id, logits.size());
    logits[id] = kNegInf;
  }
}

void ApplyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> prompt_tokens,
                            std::span<const int32_t> output_tokens, float penalty,
                            std::span<uint8_t> seen) {
  if (penalty == 1.0f) return;
  CHECK(seen.size() >= logits.size(), "seen scratch %zu < vocab %zu", seen.size(), logits.size());
  for (int32_t id : prompt_tokens) PenalizeOnce(logits, id, penalty, seen);
  for (int32_t id : output_tokens) PenalizeOnce(logits, id, penalty, seen);
  for (int32_t id : prompt_tokens) seen[id] = 0;
  for (int32_t id : output_tokens) seen[id] = 0;
}

void ApplyFrequencyPresencePenalties(std::span<float> logits, std::span<const int32_t> output_tokens,
                                     float frequency_penalty, float presence_penalty,
                                     std::span<int32_t> counts) {
  if (frequency_penalty == 0.0f && presence_penalty == 0.0f) return;
  CHECK(counts.size() >= logits.size(), "counts scratch %zu < vocab %zu", counts.size(),
        logits.size());
  for (int32_t id : output_tokens) {
    CheckToken(id, logits.size());
    ++counts[id];
  }
  // The first visit of an id applies its penalty and zeroes its count, so
  // each id is penalized once and the scratch ends all zero.
  for (int32_t id : output_tokens) {
    const int32_t c = counts[id];
    if (c == 0) continue;
    logits[id] -= frequency_penalty * static_cast<float>(c) + presence_penalty;
    counts[id] = 0;
  }
}

void ApplyTemperature(std::span<float> logits, float temperature) {
  CHECK(temperature > 0.0f, "temperature %g must be > 0 here", temperature);
  // Multiplying by the reciprocal would differ from l / T in the last bit;
  // divide so results match the straightforward definition exactly.
  for (float& l : logits) l /= temperature;
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = -1;
  float best_value = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value) {  // false for NaN; strict, so lowest id wins ties
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

void ApplyTopK(int32_t k, CandidateList* candidates) {
  if (k <= 0 || static_cast<size_t>(k) >= candidates->size()) return;
  candidates->KeepAtLeast(candidates->KthLargestValue(static_cast<size_t>(k)));
}

void ApplyTopP(float top_p, CandidateList* candidates) {
  if (top_p >= 1.0f || candidates->empty()) return;
  const double target = static_cast<double>(top_p) * candidates->Sum();
  double mass = 0.0;
  size_t keep = 0;
  while (keep < candidates->size() && mass < target) {
    if (keep == candidates->num_sorted()) candidates->SortPrefix(keep + 1);
    mass += (*candidates)[keep].value;
    ++keep;
  }
  // Rounding can leave mass just short of target after the last candidate;
  // then everything stays, which is the right answer anyway.
  candidates->SortPrefix(keep);
  candidates->TruncateSorted(keep);
}

void ApplyMinP(float min_p, CandidateList* candidates) {
  if (min_p <= 0.0f || candidates->empty()) return;
  candidates->KeepAtLeast(min_p * candidates->MaxValue());
}

int32_t DrawInverseCdf(double u, CandidateList* candidates) {
  CHECK(!candidates->empty(), "draw from an empty candidate list");
  const double target = u * candidates->Sum();
  double mass = 0.0;
  candidates->SortPrefix(1);
  int32_t last_positive = (*candidates)[0].token;
  for (size_t i = 0; i < candidates->size(); ++i) {
    if (i == candidates->num_sorted()) candidates->SortPrefix(i + 1);
    const Candidate& c = (*candidates)[i];
    if (c.value <= 0.0f) continue;
    mass += c.value;
    last_positive = c.token;
    if (mass > target) return c.token;
  }
  return last_positive;
}

}  // namespace tandem::sampling
