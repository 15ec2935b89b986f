// GammaController: how many draft tokens (gamma) each speculating sequence
// should propose this step so that speculation never makes the server
// slower ("--num-speculative-tokens auto").
//
// Model. A step that computes n tokens costs T(n): the running mean of the
// steps of exactly n tokens seen so far (n <= kMeasuredSizes), else a + b*n
// fitted online from all step times (exponentially weighted least
// squares). Measured sizes catch what a line misses (a verification of many
// positions costing more per token than a small batch, say); sizes not seen
// yet are predicted by the line, tried, and then known. A sequence whose drafts are accepted with probability alpha
// emits E(g) = (1 - alpha^(g+1)) / (1 - alpha) tokens per round with gamma
// g and adds g tokens to the step, which every sequence in it waits for. In
// a step of n tokens generating for S sequences, the batch's output rate
// changes by the factor (S - 1 + E(g)) / S * T(n) / (T(n + g) + g*c), where c
// is what drafting one more position costs (measured per Propose call:
// about 0 for n-gram, a forward of the draft model otherwise): gamma is the g
// in [0, max_gamma] maximizing it, and 0 (plain decoding) unless that
// clearly beats 1. A compute-bound forward (a small against b*n) makes
// every g > 0 lose, so a loaded server stops speculating; a latency-bound
// one (a single stream on a GPU, or small batches) speculates deeply.
// Each sequence's profile is a decayed count per position, starting from the
// profile of all sequences so far (the draft's typical quality on this
// traffic; `prior_acceptance` at every position before any round).
//
// Thread-safety: none (scheduler-thread state).
#ifndef TANDEM_COORDINATOR_DECODING_GAMMA_CONTROLLER_H_
#define TANDEM_COORDINATOR_DECODING_GAMMA_CONTROLLER_H_

#include <array>
#include <cstdint>

namespace tandem::coordinator {

// Per-position acceptance counts: tried[i] rounds reached draft i + 1 (drafts
// 1..i all accepted and at least i + 1 proposed), accepted[i] of them
// accepted it; decayed each round. Positions past kPositions share the last.
// The rate at a position blends its counts with a prior worth
// `prior_weight` rounds (one at first, decayed like the counts): `base` at
// the first position, the previous position's rate at the others, so
// positions never reached yet are not stuck at a guess.
struct AcceptanceProfile {
  static constexpr int kPositions = 16;
  std::array<float, kPositions> tried{};
  std::array<float, kPositions> accepted{};
  double base = 0.0;
  float prior_weight = 1.0f;

  // Every position at rate `alpha`, worth `weight` rounds of evidence.
  static AcceptanceProfile Constant(double alpha, double weight);
  // h_k: the rate of accepting draft k (>= 1) after drafts 1..k-1.
  double Rate(int32_t k) const;
  // Expected tokens emitted by a round of `gamma` drafts (>= 0): the
  // accepted drafts plus the correction / bonus token.
  double ExpectedTokens(int32_t gamma) const;
};

struct GammaControllerConfig {
  int32_t max_gamma = 8;            // [1, 64]
  double prior_acceptance = 0.6;    // first-draft rate before any round
  double acceptance_decay = 0.8;    // weight of a sequence's old counts per round
  double cost_decay = 0.95;         // weight of old steps in the cost fit
  // Cost model before any step was seen: a + b*n with these. (After one
  // size of step only, b is taken as 1/16 of the mean step.)
  double prior_fixed_ms = 10.0;
  double prior_per_token_ms = 1.0;
};

// Expected tokens emitted by one speculative round with one acceptance rate
// alpha in [0, 1] at every position (drafts accepted independently).
double ExpectedTokensPerRound(double alpha, int32_t gamma);

class GammaController {
 public:
  explicit GammaController(const GammaControllerConfig& config = {});

  // Records one step: `num_tokens` computed, costing `step_ms` (the
  // scheduler's whole step but the draft's proposal: forward, verification
  // and sampling of every position, RPC, folding the results).
  void ObserveStep(int64_t num_tokens, double step_ms);
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

  // The step cost model: fixed and per-token milliseconds of the line (both
  // >= 0), and the predicted milliseconds of a step of n tokens.
  double fixed_ms() const;
  double per_token_ms() const;
  double StepMs(int64_t num_tokens) const;
  static constexpr int kMeasuredSizes = 64;

  // Gamma for a sequence with acceptance `profile` in a step that
  // computes `batch_tokens` tokens (>= 1; the drafts of sequences already
  // decided included) and generates for `batch_sequences` sequences (>= 1,
  // this one included); 0 = plain.
  int32_t Choose(const AcceptanceProfile& profile, int64_t batch_tokens,
                 int64_t batch_sequences) const;

  // What a new sequence starts from: no counts of its own, and the first
  // position's rate over every round so far as its base.
  AcceptanceProfile NewProfile() const;
  // Folds one round's outcome (`accepted` of `proposed` drafts) into
  // `profile`, and into the profile of all sequences.
  void UpdateAcceptance(AcceptanceProfile& profile, int32_t accepted, int32_t proposed);
  // The running share of draft tokens accepted over every round (the
  // configured prior before any): for logs and metrics.
  double prior_acceptance() const { return global_acceptance_; }

 private:
  // True once the steps seen vary in size enough to fit the slope.
  bool SlopeIdentified() const;

  GammaControllerConfig config_;
  // Exponentially weighted sums for the least-squares fit ms = a + b*n.
  double w_ = 0, wx_ = 0, wy_ = 0, wxx_ = 0, wxy_ = 0;
  // Running mean step time per size 1..kMeasuredSizes (0 = not seen).
  std::array<double, kMeasuredSizes + 1> size_ms_{};
  double draft_ms_ = 0;
  bool draft_seen_ = false;
  double global_acceptance_;
  AcceptanceProfile global_profile_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_DECODING_GAMMA_CONTROLLER_H_
