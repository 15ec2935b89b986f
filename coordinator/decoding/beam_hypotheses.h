// BeamHypotheses: the finished hypotheses of one beam group, with Hugging
// Face transformers' semantics (generation/beam_search.py BeamHypotheses,
// 4.38-4.4x): at most `num_beams` kept, each scored
// sum_logprobs / generated_len ** length_penalty; the worst kept score gates
// additions; is_done decides, by early_stopping, whether a running beam could
// still beat the worst kept hypothesis.
//
// Thread-safety: none (one request's scheduler-thread state).
#ifndef TANDEM_COORDINATOR_DECODING_BEAM_HYPOTHESES_H_
#define TANDEM_COORDINATOR_DECODING_BEAM_HYPOTHESES_H_

#include <cstdint>
#include <vector>

#include "coordinator/api/beam_search_params.h"

namespace tandem::coordinator {

struct BeamHypothesis {
  double score = 0;               // sum_logprobs / generated_len ** length_penalty
  double sum_logprobs = 0;
  std::vector<int32_t> tokens;    // generated tokens (the EOS that ended it excluded)
  bool ended_with_eos = false;
  int32_t eos_token = -1;         // the EOS that ended it, when ended_with_eos
};

class BeamHypotheses {
 public:
  // `max_new_tokens` is transformers' max_length - prompt length (used by
  // early_stopping "never" with a positive length penalty).
  BeamHypotheses(int32_t num_beams, double length_penalty, EarlyStopping early_stopping,
                 int32_t max_new_tokens);

  int32_t size() const { return static_cast<int32_t>(beams_.size()); }
  const std::vector<BeamHypothesis>& beams() const { return beams_; }
  double worst_score() const { return worst_score_; }

  // Offers a hypothesis of `generated_len` tokens (an EOS that ended it
  // counted) whose log-probabilities sum to `sum_logprobs`.
  void Add(BeamHypothesis hypothesis, double sum_logprobs, int32_t generated_len);

  // Whether no running beam can improve this group: `best_sum_logprobs` is
  // the best running candidate's score, `generated_len` the length it would
  // have (the token being chosen counted).
  bool IsDone(double best_sum_logprobs, int32_t generated_len) const;

 private:
  const int32_t num_beams_;
  const double length_penalty_;
  const EarlyStopping early_stopping_;
  const int32_t max_new_tokens_;
  std::vector<BeamHypothesis> beams_;  // in insertion order, as transformers keeps them
  double worst_score_ = 1e9;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_DECODING_BEAM_HYPOTHESES_H_
