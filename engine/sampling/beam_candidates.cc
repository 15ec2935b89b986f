#include "engine/sampling/beam_candidates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/logging.h"
#include "engine/sampling/logits_processor.h"
#include "kernels/beam_sampling.h"

namespace tandem::sampling {
namespace {

// log_softmax in place (float terms, double sum, as Sampler's logprobs).
void LogSoftmax(std::span<float> x) {
  float max_x = kNegInf;
  for (float v : x) max_x = std::max(max_x, v);
  if (!std::isfinite(max_x)) return;
  double sum = 0.0;
  for (float v : x) sum += std::exp(v - max_x);
  const double log_norm = static_cast<double>(max_x) + std::log(sum);
  for (float& v : x) v = static_cast<float>(static_cast<double>(v) - log_norm);
}

// Token ids with a finite score, best first (ties: lower id).
std::vector<int32_t> RankedFinite(std::span<const float> scores) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] > kNegInf) ids.push_back(static_cast<int32_t>(i));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  });
  return ids;
}

// transformers' TopK / TopP / MinP warpers with min_tokens_to_keep = 2.
void ApplyBeamWarpers(const SamplingParams& p, std::span<float> scores) {
  if (p.temperature != 1.0f) ApplyTemperature(scores, p.temperature);
  std::vector<int32_t> ranked = RankedFinite(scores);
  size_t keep = ranked.size();
  if (p.top_k > 0) {
    const size_t k =
        std::max(static_cast<size_t>(p.top_k), static_cast<size_t>(kernels::kBeamMinTokensToKeep));
    if (k < keep) {
      // Ties with the k-th score stay, as a `score < kth` mask keeps them.
      const float kth = scores[ranked[k - 1]];
      while (keep > k && scores[ranked[keep - 1]] < kth) --keep;
    }
  }
  if (p.top_p < 1.0f || p.min_p > 0.0f) {
    // Weights over the tokens kept so far.
    const float best = keep > 0 ? scores[ranked[0]] : 0.0f;
    std::vector<float> weights(keep);
    for (size_t i = 0; i < keep; ++i) weights[i] = std::exp(scores[ranked[i]] - best);
    keep = static_cast<size_t>(kernels::BeamNucleusSize(
        weights.data(), static_cast<int32_t>(keep), p.top_p, p.min_p));
  }
  for (size_t i = keep; i < ranked.size(); ++i) scores[ranked[i]] = kNegInf;
}

}  // namespace

void ComputeBeamCandidates(const SamplingRow& row, std::span<float> scores,
                           std::span<uint8_t> seen, std::span<int32_t> counts,
                           std::vector<BeamToken>* out) {
  const SamplingParams& p = *row.params;
  std::copy(row.logits, row.logits + scores.size(), scores.begin());
  LogSoftmax(scores);
  ApplyRepetitionPenalty(scores, row.prompt_tokens, row.output_tokens, p.repetition_penalty, seen);
  ApplyFrequencyPresencePenalties(scores, row.output_tokens, p.frequency_penalty,
                                  p.presence_penalty, counts);
  if (static_cast<int64_t>(row.output_tokens.size()) < p.min_tokens) {
    MaskTokens(scores, p.stop_token_ids);
    if (!p.ignore_eos) MaskTokens(scores, row.eos_token_ids);
  }
  if (p.beam_sample) ApplyBeamWarpers(p, scores);

  std::vector<BeamToken> all;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!(scores[i] > kNegInf)) continue;
    const int32_t token = static_cast<int32_t>(i);
    float key = scores[i];
    if (p.beam_sample) {
      key += kernels::GumbelNoise(row.seed, row.stream, row.output_tokens.size(), token);
    }
    all.push_back({token, scores[i], key});
  }
  if (all.empty()) {
    // Everything masked (a degenerate row): fall back to the raw argmax.
    const int32_t token = std::max(
        0, Argmax(std::span<const float>(row.logits, scores.size())));
    all.push_back({token, 0.0f, 0.0f});
  }
  const size_t k = std::min(all.size(), static_cast<size_t>(std::max(1, p.beam_candidates)));
  auto better = [](const BeamToken& a, const BeamToken& b) {
    return a.key != b.key ? a.key > b.key : a.token < b.token;
  };
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(), better);
  all.resize(k);
  *out = std::move(all);
}

}  // namespace tandem::sampling
