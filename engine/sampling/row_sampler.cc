#include "engine/sampling/row_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/logging.h"
#include "engine/sampling/beam_candidates.h"
#include "engine/sampling/logits_processor.h"
#include "engine/sampling/rng.h"
#include "kernels/kernels.h"

namespace tandem::sampling {
namespace {

// NaN ranks below everything, so orderings over raw logits stay strict weak.
inline float RankKey(float logit) {
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
}

}  // namespace

RowSampler::RowSampler(int32_t vocab_size) : vocab_size_(vocab_size), isa_(kernels::BestIsa()) {
  CHECK(vocab_size >= 1, "vocab_size %d must be >= 1", vocab_size);
  const size_t v = static_cast<size_t>(vocab_size);
  logits_.assign(v, 0.0f);
  seen_.assign(v, 0);
  counts_.assign(v, 0);
  token_ids_.assign(v, 0);
}

void RowSampler::ApplyPenalties(const SamplingRow& row) {
  const SamplingParams& p = *row.params;
  std::span<float> logits(logits_);
  std::copy(row.logits, row.logits + vocab_size_, logits.begin());
  if (static_cast<int64_t>(row.output_tokens.size()) < p.min_tokens) {
    MaskTokens(logits, p.stop_token_ids);
    if (!p.ignore_eos) MaskTokens(logits, row.eos_token_ids);
  }
  ApplyRepetitionPenalty(logits, row.prompt_tokens, row.output_tokens, p.repetition_penalty,
                         seen_);
  ApplyFrequencyPresencePenalties(logits, row.output_tokens, p.frequency_penalty,
                                  p.presence_penalty, counts_);
}

CandidateList* RowSampler::Truncate(const SamplingParams& p) {
  std::span<float> logits(logits_);
  if (p.temperature != 1.0f) ApplyTemperature(logits, p.temperature);
  ApplyTopK(p.top_k, logits, &top_k_);
  candidates_.Reset(logits);
  if (candidates_.empty()) return nullptr;
  candidates_.ToWeights();
  ApplyTopP(p.top_p, &candidates_);
  ApplyMinP(p.min_p, &candidates_);
  return &candidates_;
}

const CandidateList* RowSampler::ProcessedCandidates(const SamplingRow& row) {
  CHECK(row.logits != nullptr, "row without logits");
  CHECK(row.params != nullptr, "row without params");
  const SamplingParams& p = *row.params;
  CHECK(p.temperature >= kGreedyTemperature && p.beam_candidates == 0,
        "ProcessedCandidates needs a sampling row (temperature %g, beam_candidates %d)",
        p.temperature, p.beam_candidates);
  ApplyPenalties(row);
  return Truncate(p);
}

void RowSampler::Sample(const SamplingRow& row, SampleResult* result) {
  CHECK(row.logits != nullptr, "row without logits");
  CHECK(row.params != nullptr, "row without params");
  CHECK(row.draft_token < 0, "a row with draft token %d is the verifier's (VerifyPosition)",
        row.draft_token);
  const SamplingParams& p = *row.params;
  if (p.beam_candidates > 0) {
    ComputeBeamCandidates(row, logits_, seen_, counts_, &result->beam_candidates);
    result->token = result->beam_candidates.front().token;
    ComputeLogprobs(row, result);
    return;
  }
  ApplyPenalties(row);
  int32_t token = -1;
  if (p.temperature < kGreedyTemperature) {
    token = Argmax(logits_);
  } else if (CandidateList* candidates = Truncate(p); candidates != nullptr) {
    const double u = UniformDraw(row.seed, row.stream, row.output_tokens.size());
    token = DrawInverseCdf(u, candidates);
  }
  if (token < 0) {
    token =
        std::max(0, Argmax(std::span<const float>(row.logits, static_cast<size_t>(vocab_size_))));
  }
  result->token = token;
  ComputeLogprobs(row, result);
}

void RowSampler::ComputeLogprobs(const SamplingRow& row, SampleResult* result) {
  ComputeLogprobs(row.logits, row.params->logprobs, result);
}

void RowSampler::ComputeLogprobs(const float* raw, int32_t num_top, SampleResult* result) {
  const size_t v = static_cast<size_t>(vocab_size_);
  // log_softmax(x)_i = x_i - (max + log(sum exp(x - max))), vectorized.
  const kernels::SoftmaxNormalizer norm = kernels::LogSoftmaxNormalizer(raw, vocab_size_, isa_);
  auto logprob = [&](int32_t id) { return RawLogprob(raw[id], norm.max, norm.sum); };
  result->logprob = logprob(result->token);

  result->top_logprobs.clear();
  const size_t k = std::min(static_cast<size_t>(std::max(0, num_top)), v);
  if (k == 0) return;
  std::vector<int32_t>& ids = token_ids_;
  std::iota(ids.begin(), ids.end(), 0);
  const auto mid = ids.begin() + static_cast<std::ptrdiff_t>(k);
  std::partial_sort(ids.begin(), mid, ids.end(), [raw](int32_t a, int32_t b) {
    const float ka = RankKey(raw[a]);
    const float kb = RankKey(raw[b]);
    return ka > kb || (ka == kb && a < b);
  });
  result->top_logprobs.reserve(k);
  for (size_t i = 0; i < k; ++i) result->top_logprobs.push_back({ids[i], logprob(ids[i])});
}

}  // namespace tandem::sampling
