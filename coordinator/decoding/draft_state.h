// DraftState: what the scheduler knows of one sequence's speculative draft
// (coordinator/draft_pool.h has the proposer contract it follows). Plain
// data with small helpers; the scheduler owns one per sequence and is the
// only one to touch it (scheduler thread).
//
// A round: the scheduler asks the pool for a proposal (Proposal), sends the
// first `num_in_step` of its tokens with the sequence's own token, and after
// the step rolls the draft back (Release) to what the sequence kept.
// A beam sequence is not verified: the worker returns the candidates after
// each draft token (BeamDraftWalk), and the beam search takes its steps along
// the drafts without a forward while it follows them.
#ifndef TANDEM_COORDINATOR_DECODING_DRAFT_STATE_H_
#define TANDEM_COORDINATOR_DECODING_DRAFT_STATE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "coordinator/decoding/beam_search.h"
#include "coordinator/decoding/gamma_controller.h"
#include "engine/sampling/speculative_verifier.h"

namespace tandem::coordinator {

// This step's proposal for one sequence.
struct DraftProposalState {
  std::vector<int32_t> tokens;
  std::vector<sampling::DraftProbs> probs;  // q at each token (verification)
  int32_t num_in_step = 0;                  // leading tokens sent with the step

  bool empty() const { return tokens.empty(); }
  void Clear() {
    tokens.clear();
    probs.clear();
    num_in_step = 0;
  }
};

// Speculative beam search: the drafts a beam may still walk along, each
// with the candidates the worker computed after it, and the round's
// proposal with the length it extended (to measure what was followed).
struct BeamDraftWalk {
  std::vector<int32_t> ahead;
  std::vector<std::vector<BeamCandidate>> ahead_candidates;  // one row per `ahead` token
  std::vector<int32_t> proposed;
  int32_t proposed_at = 0;  // sequence length the proposal continued

  // True while the beam can take its next step without a forward.
  bool on_draft() const { return !ahead.empty(); }
  // Leaves the draft: nothing ahead is usable any more.
  void Leave() {
    ahead.clear();
    ahead_candidates.clear();
  }
  // How many of the proposed tokens `tokens` (the beam's history) followed.
  int32_t Matched(const std::vector<int32_t>& tokens) const {
    int32_t matched = 0;
    while (matched < static_cast<int32_t>(proposed.size()) &&
           proposed_at + matched < static_cast<int32_t>(tokens.size()) &&
           tokens[proposed_at + matched] == proposed[matched]) {
      ++matched;
    }
    return matched;
  }
};

struct DraftState {
  bool active = false;  // the request speculates and the draft still works
  int32_t held_len = 0;  // tokens of the sequence the draft holds
  AcceptanceProfile acceptance;
  DraftProposalState proposal;
  BeamDraftWalk beam;

  // Stops speculating: the draft lost the sequence.
  void Deactivate() {
    active = false;
    held_len = 0;
  }
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_DECODING_DRAFT_STATE_H_
