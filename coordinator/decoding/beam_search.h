// BeamSearch: the decoding state of one beam-search request, with Hugging
// Face transformers' semantics (GenerationMixin._beam_search /
// _group_beam_search and BeamSearchScorer, 4.38-4.4x), so outputs and scores
// match transformers generate(num_beams=...) exactly.
//
// The caller (the scheduler) owns the sequences: each step it gives, for
// every running beam, that beam's candidates — its best next tokens with
// their scores after logits processing (log_softmax, then processors such as
// min_new_tokens' EOS mask, then warpers when sampling) — and applies the
// returned moves: new beam i continues old beam `parent` with `token` (fork
// the parent's KV copy-on-write when several new beams share it; free beams
// no move continues). Per group and step, as transformers does: add the beam
// scores, keep the best max(2, 1 + #EOS) x group_size candidates (sampling:
// drawn without replacement in proportion to exp(score), by Gumbel keys),
// walk them best first; an EOS among the first group_size closes a
// hypothesis (BeamHypotheses), other tokens fill the group's next beams.
// Diverse beam search (num_beam_groups > 1) lowers a group's scores by
// diversity_penalty x how often earlier groups chose each token this step
// (Hamming diversity). A group is done by BeamHypotheses::IsDone; its beams
// stop running, and transformers' padding of them (pad = first EOS id) still
// counts for later groups' diversity. Finalize adds the running beams of
// unfinished groups and returns the num_return_sequences best.
//
// Thread-safety: none (scheduler-thread state).
#ifndef TANDEM_COORDINATOR_DECODING_BEAM_SEARCH_H_
#define TANDEM_COORDINATOR_DECODING_BEAM_SEARCH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "coordinator/api/beam_search_params.h"
#include "coordinator/decoding/beam_hypotheses.h"

namespace tandem::coordinator {

// One next-token choice of a running beam. `score` is the processed
// log-probability; `key` orders candidates for selection: equal to `score`
// in greedy beam search, score + Gumbel noise when sampling.
struct BeamCandidate {
  int32_t token = 0;
  float score = 0.0f;
  float key = 0.0f;
};

// New beam i continues running beam `parent` (an index into the beams given
// to Step) with `token`.
struct BeamMove {
  int32_t parent = 0;
  int32_t token = 0;
};

class BeamSearch {
 public:
  // `eos_token_ids` close hypotheses (may be empty: ignore_eos);
  // `max_new_tokens` >= 1 bounds the generated length. `params` must pass
  // ValidateBeamSearchParams (CHECKed).
  BeamSearch(const BeamSearchParams& params, std::vector<int32_t> eos_token_ids,
             int32_t max_new_tokens);

  // Candidates each running beam must supply per step (its best by key,
  // sorted by key descending): the group's keep count, plus room for the
  // diversity penalty to push that many down.
  int32_t candidates_per_beam() const;
  // Beams running now: 1 before the first step (the prompt), then the beams
  // of groups not done.
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  // Tokens generated so far by every running beam.
  int32_t num_generated() const { return num_generated_; }
  // True when every group is done or max_new_tokens were generated.
  bool done() const { return done_; }

  // One step: `candidates[i]` are running beam i's candidates (sorted by key
  // descending, at least candidates_per_beam() unless the vocabulary is
  // smaller). Returns the moves that form the next running beams, in order.
  // CHECKs the sizes (a scheduler bug).
  std::vector<BeamMove> Step(std::span<const std::vector<BeamCandidate>> candidates);

  // The best num_return_sequences hypotheses, best first (running beams of
  // unfinished groups included). Call once done().
  std::vector<BeamHypothesis> Finalize();

  // The current best running beam's tokens (for streaming), or the best
  // finished hypothesis when nothing runs.
  std::vector<int32_t> BestTokens() const;

 private:
  struct Beam {
    std::vector<int32_t> tokens;  // generated so far
    float score = 0.0f;           // sum of processed logprobs (float32, as transformers)
    int32_t group = 0;
  };

  // Candidates each group keeps per step: max(2, 1 + #EOS) x group_size.
  int32_t keep_per_group() const;
  bool IsEos(int32_t token) const;

  // Step's parts, in the order it runs them.
  struct Source;  // a running beam a group extends this step, with its score
  struct Item;    // one candidate continuation of a group's beam
  // Per group, the group_size beams it extends: the running beams, or on the
  // first step group_size copies of the prompt (all but the first at
  // kUnusedBeamScore).
  std::vector<std::vector<Source>> GroupSources() const;
  // Every candidate of a group's `sources` as an Item, its score and key
  // lowered by diversity_penalty x the count in `chosen_before` (tokens
  // earlier groups chose this step).
  std::vector<Item> GroupItems(std::span<const Source> sources,
                               std::span<const std::vector<BeamCandidate>> candidates,
                               const absl::flat_hash_map<int32_t, int32_t>& chosen_before) const;
  // Keeps the best keep_per_group() `items` by key (ties: source beam, then
  // token); when sampling, orders them by total score (stable).
  void SelectItems(std::vector<Item>& items) const;
  // Walks group `g`'s selected `items` best first: an EOS among the first
  // group_size closes a hypothesis, other tokens append the group's
  // group_size next beams to `next` (their moves to `moves`); then updates
  // group_done_[g]. CHECKs that the group filled its beams.
  void ExtendGroup(int32_t g, std::span<const Item> items, std::span<const Source> sources,
                   std::vector<Beam>& next, std::vector<BeamMove>& moves);
  // Makes the beams of `next` whose groups are not done the running beams
  // and returns their moves.
  std::vector<BeamMove> KeepRunning(std::vector<Beam> next, std::span<const BeamMove> moves);

  const BeamSearchParams params_;
  const std::vector<int32_t> eos_;
  const int32_t max_new_tokens_;
  const int32_t group_size_;
  std::vector<BeamHypotheses> hyps_;  // [groups]
  std::vector<bool> group_done_;      // [groups]
  std::vector<Beam> running_;
  int32_t num_generated_ = 0;
  bool done_ = false;
  bool first_step_ = true;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_DECODING_BEAM_SEARCH_H_
