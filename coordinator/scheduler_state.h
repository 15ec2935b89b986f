// Scheduler's internal state types (Sequence, RequestState), shared by the
// files that implement Scheduler: scheduler.cc (batching, preemption,
// sampling), scheduler_beam.cc (beam search). Not part of any interface;
// scheduler-thread state only.
#ifndef TANDEM_COORDINATOR_SCHEDULER_STATE_H_
#define TANDEM_COORDINATOR_SCHEDULER_STATE_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/decoding/beam_search.h"
#include "coordinator/scheduler.h"
#include "engine/sampling/stop_checker.h"
#include "engine/tokenizer/incremental_detokenizer.h"

namespace tandem::coordinator {

using Clock = std::chrono::steady_clock;

// One decoding sequence: a completion of a request, or (n > 1) the parent
// that prefills the shared prompt before forking the completions.
struct Scheduler::Sequence {
  RequestState* request = nullptr;
  int32_t index = 0;          // completion index; the RNG stream
  bool fork_parent = false;
  SeqId id;                   // changes on every admission to the KV cache
  bool in_kv = false;
  bool in_waiting = false;
  bool finished = false;
  std::vector<int32_t> tokens;  // prompt + generated
  int32_t prompt_len = 0;
  int32_t num_computed = 0;     // tokens whose K/V are in the cache
  int32_t scheduled = 0;        // tokens computed by the step in flight
  // Speculative decoding: what the draft holds (its proposer contract), the
  // acceptance profile, and this step's proposal (verified along with
  // the sequence's one token; num_step_drafts of them made it into the step).
  bool speculate = false;       // the request speculates and the draft works
  int32_t draft_len = 0;
  AcceptanceProfile acceptance;
  std::vector<int32_t> drafts;
  std::vector<sampling::DraftProbs> draft_probs;
  int32_t num_step_drafts = 0;
  // Speculative beam search: the drafts still ahead of this beam and the
  // candidates the worker computed after each (the beam may take several
  // steps along them without a forward); what was proposed, from which
  // length, to roll the draft back to what the beam followed.
  std::vector<int32_t> spec_drafts;
  std::vector<std::vector<BeamCandidate>> draft_candidates;
  std::vector<int32_t> proposed;
  int32_t draft_base = 0;
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detokenizer;
  std::unique_ptr<sampling::StopChecker> stop_checker;
  Completion completion;
  // Beam search: this sequence is one running beam; after its sampling
  // step it holds its candidates until every beam of the request has them.
  bool beam = false;
  bool has_candidates = false;
  std::vector<BeamCandidate> candidates;

  // Tokens this sequence must compute before it can sample (the parent stops
  // one short of the prompt: each child computes the last token itself).
  int32_t target() const {
    return fork_parent ? prompt_len - 1 : static_cast<int32_t>(tokens.size());
  }
};

struct Scheduler::RequestState {
  GenerateRequest request;
  uint64_t seed = 0;
  int64_t arrival = 0;
  Clock::time_point submit_time;
  std::optional<Clock::time_point> admit_time;
  std::optional<Clock::time_point> first_token_time;
  std::unique_ptr<Sequence> parent;                // n > 1 only
  std::vector<std::unique_ptr<Sequence>> completions;
  // Beam search only: the decoding state, the running beams in its order,
  // the results once done, and the next unused RNG stream (every beam
  // sequence gets its own, so beam sampling's noise is independent).
  std::unique_ptr<BeamSearch> beam;
  std::vector<std::unique_ptr<Sequence>> beams;
  std::vector<Completion> beam_results;
  // Speculative decoding: the params drafts are proposed with (the target's,
  // greedy: deterministic drafts keep verification exact and cheap) and the
  // request's counters.
  sampling::SamplingParams draft_params;
  int64_t num_speculative_rounds = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  uint64_t next_beam_stream = 0;
  int32_t num_unfinished = 0;
  int64_t prefix_hit_tokens = 0;
  bool admitted_once = false;
  bool done = false;
  absl::Status status;  // why the request failed; OK otherwise
};

// Priority first (higher first), then arrival (earlier first).
template <typename S>
inline bool RunsBefore(const S* a, const S* b) {
  if (a->request->request.priority != b->request->request.priority) {
    return a->request->request.priority > b->request->request.priority;
  }
  return a->request->arrival < b->request->arrival;
}

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SCHEDULER_STATE_H_
