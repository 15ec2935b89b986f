// GammaController: how many draft tokens (gamma) each speculating sequence
// should propose this step so that speculation never makes the server
// slower ("--num-speculative-tokens auto").
//
// Model. A step that computes n tokens costs about T = a + b*n (fitted
// online from the worker's forward times: exponentially weighted least
// squares). A sequence whose drafts are accepted with probability alpha
// emits E(g) = (1 - alpha^(g+1)) / (1 - alpha) tokens per round with gamma
// g and adds g tokens to the step, which every sequence in it waits for. In
// a step of n tokens generating for S sequences, the batch's output rate
// changes by the factor (S - 1 + E(g)) / S * T / (T + g*b + g*c), where c
// is what drafting one more position costs (measured per Propose call:
// about 0 for n-gram, a forward of the draft model otherwise): gamma is the g
// in [0, max_gamma] maximizing it, and 0 (plain decoding) unless that
// clearly beats 1. A compute-bound forward (a small against b*n) makes
// every g > 0 lose, so a loaded server stops speculating; a latency-bound
// one (a single stream on a GPU, or small batches) speculates deeply.
// alpha is each sequence's acceptance rate, an exponential moving average
// starting from `prior_acceptance`.
//
// Thread-safety: none (scheduler-thread state).
#ifndef TANDEM_COORDINATOR_DECODING_GAMMA_CONTROLLER_H_
#define TANDEM_COORDINATOR_DECODING_GAMMA_CONTROLLER_H_

#include <cstdint>

namespace tandem::coordinator {

struct GammaControllerConfig {
  int32_t max_gamma = 8;            // [1, 64]
  double prior_acceptance = 0.6;    // alpha before a sequence has history
  double acceptance_decay = 0.8;    // weight of the old alpha per round
  double cost_decay = 0.95;         // weight of old steps in the cost fit
  // Cost model before any step was seen: a + b*n with these. (After one
  // size of step only, b is taken as 1/16 of the mean step.)
  double prior_fixed_ms = 10.0;
  double prior_per_token_ms = 1.0;
};

// Expected tokens emitted by one speculative round: accepted drafts plus
// the correction / bonus token. alpha in [0, 1], gamma >= 0.
double ExpectedTokensPerRound(double alpha, int32_t gamma);

class GammaController {
 public:
  explicit GammaController(const GammaControllerConfig& config = {});

  // Records one step's forward: `num_tokens` computed in `forward_ms`.
  void ObserveStep(int64_t num_tokens, double forward_ms);
  // Records one Propose call that drafted up to `positions` tokens per
  // sequence in `ms` (the scheduler waits for it before the step). Only
  // steady-state calls count: a call that also fed the draft a prompt
  // (prefill) would overstate the cost of drafting.
  void ObserveDraft(int32_t positions, double ms);
  // Milliseconds per drafted position (exponential moving average).
  double draft_ms_per_position() const { return draft_ms_; }
  // False until a steady-state Propose was observed: until then the
  // scheduler lets one sequence probe the draft instead of paying the
  // draft's prefill for every sequence on a guess.
  bool draft_cost_known() const { return draft_seen_; }

  // The step cost model: fixed and per-token milliseconds (both >= 0).
  double fixed_ms() const;
  double per_token_ms() const;

  // Gamma for a sequence with acceptance rate `alpha` in a step that
  // computes `batch_tokens` tokens (>= 1) and generates for
  // `batch_sequences` sequences (>= 1, this one included); 0 = plain.
  int32_t Choose(double alpha, int64_t batch_tokens, int64_t batch_sequences) const;

  // Folds one round's outcome (accepted of proposed) into `alpha`, and
  // into the acceptance rate of all sequences (the prior of new ones).
  double UpdateAcceptance(double alpha, int32_t accepted, int32_t proposed);
  // What a new sequence starts from: the running acceptance rate over every
  // round so far (the draft's typical quality on this traffic), or the
  // configured prior before any round.
  double prior_acceptance() const { return global_acceptance_; }

 private:
  // True once the steps seen vary in size enough to fit the slope.
  bool SlopeIdentified() const;

  GammaControllerConfig config_;
  // Exponentially weighted sums for the least-squares fit ms = a + b*n.
  double w_ = 0, wx_ = 0, wy_ = 0, wxx_ = 0, wxy_ = 0;
  double draft_ms_ = 0;
  bool draft_seen_ = false;
  double global_acceptance_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_DECODING_GAMMA_CONTROLLER_H_
