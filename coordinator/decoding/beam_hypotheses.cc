#include "coordinator/decoding/beam_hypotheses.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tandem::coordinator {

BeamHypotheses::BeamHypotheses(int32_t num_beams, double length_penalty,
                               EarlyStopping early_stopping, int32_t max_new_tokens)
    : num_beams_(num_beams),
      length_penalty_(length_penalty),
      early_stopping_(early_stopping),
      max_new_tokens_(max_new_tokens) {}

void BeamHypotheses::Add(BeamHypothesis hypothesis, double sum_logprobs, int32_t generated_len) {
  const double score = sum_logprobs / std::pow(static_cast<double>(generated_len), length_penalty_);
  if (size() >= num_beams_ && score <= worst_score_) return;
  hypothesis.score = score;
  hypothesis.sum_logprobs = sum_logprobs;
  beams_.push_back(std::move(hypothesis));
  if (size() > num_beams_) {
    // Drop the worst (the first of equal worst ones, as Python's sorted()
    // over (score, index) does); the new worst is the runner-up.
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < beams_.size(); ++i) order.emplace_back(beams_[i].score, i);
    std::sort(order.begin(), order.end());
    beams_.erase(beams_.begin() + static_cast<std::ptrdiff_t>(order[0].second));
    worst_score_ = order[1].first;
  } else {
    worst_score_ = std::min(score, worst_score_);
  }
}

bool BeamHypotheses::IsDone(double best_sum_logprobs, int32_t generated_len) const {
  if (size() < num_beams_) return false;
  switch (early_stopping_) {
    case EarlyStopping::kTrue:
      return true;
    case EarlyStopping::kFalse:
      return worst_score_ >=
             best_sum_logprobs / std::pow(static_cast<double>(generated_len), length_penalty_);
    case EarlyStopping::kNever: {
      // With a positive penalty longer is better: the bound is at max length.
      const int32_t len = length_penalty_ > 0.0 ? max_new_tokens_ : generated_len;
      return worst_score_ >= best_sum_logprobs / std::pow(static_cast<double>(len), length_penalty_);
    }
  }
  return false;
}

}  // namespace tandem::coordinator
