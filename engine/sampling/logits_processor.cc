#include "engine/sampling/logits_processor.h"

#include <cmath>
#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>

#include "common/logging.h"

namespace tandem::sampling {
namespace {

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

float RawLogprob(float logit, float max, double sum) {
  const double value = std::isnan(logit) ? static_cast<double>(kNegInf) : logit;
  return static_cast<float>(value - (static_cast<double>(max) + std::log(sum)));
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

void ApplyTopK(int32_t k, std::span<float> logits, std::vector<float>* scratch) {
  if (k <= 0 || static_cast<size_t>(k) >= logits.size()) return;
  const size_t kk = static_cast<size_t>(k);
  std::vector<float>& values = *scratch;
  values.clear();
  float threshold;
  if (kk * 8 <= logits.size()) {
    // values is a min-heap of the k largest live logits seen so far; after
    // it fills, most logits cost one compare against its top.
    const auto greater = std::greater<float>();
    for (float l : logits) {
      if (!(l > kNegInf)) continue;  // -inf and NaN
      if (values.size() < kk) {
        values.push_back(l);
        std::push_heap(values.begin(), values.end(), greater);
      } else if (l > values.front()) {
        std::pop_heap(values.begin(), values.end(), greater);
        values.back() = l;
        std::push_heap(values.begin(), values.end(), greater);
      }
    }
    if (values.size() < kk) return;
    threshold = values.front();
  } else {
    for (float l : logits) {
      if (l > kNegInf) values.push_back(l);
    }
    if (values.size() <= kk) return;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(kk - 1),
                     values.end(), std::greater<float>());
    threshold = values[kk - 1];
  }
  for (float& l : logits) {
    if (l < threshold) l = kNegInf;
  }
}

void ApplyTopP(float top_p, CandidateList* candidates) {
  if (top_p >= 1.0f || candidates->empty()) return;
  const double target = static_cast<double>(top_p) * candidates->Sum();
  const size_t last = candidates->FindMassCrossing(target, MassCrossing::kReaches);
  // Not reached only when rounding leaves the full mass an ulp short of a
  // target near it; then everything stays, which is the right answer anyway.
  if (last < candidates->size()) candidates->KeepHead(last + 1);
}

void ApplyMinP(float min_p, CandidateList* candidates) {
  if (min_p <= 0.0f || candidates->empty()) return;
  candidates->KeepAtLeast(min_p * candidates->MaxValue());
}

int32_t DrawInverseCdf(double u, CandidateList* candidates) {
  CHECK(!candidates->empty(), "draw from an empty candidate list");
  const double target = u * candidates->Sum();
  const size_t i = candidates->FindMassCrossing(target, MassCrossing::kExceeds);
  if (i < candidates->size()) return (*candidates)[i].token;
  // Rounding left the walk short of u * total (u within an ulp of 1): the
  // answer is the canonically last candidate of positive weight.
  const Candidate* last = nullptr;
  for (const Candidate& c : candidates->items()) {
    if (c.value > 0.0f && (last == nullptr || CandidateBefore(*last, c))) last = &c;
  }
  return last != nullptr ? last->token : (*candidates)[0].token;
}

}  // namespace tandem::sampling
