// Scheduler's internal state types (Sequence, RequestState), shared by the
// files that implement Scheduler: scheduler.cc (requests and their
// lifecycle), scheduler_schedule.cc (building a step), scheduler_apply.cc
// (folding its result), scheduler_speculative.cc and scheduler_beam.cc. Not
// part of any interface; scheduler-thread state only.
#ifndef TANDEM_COORDINATOR_SCHEDULER_SCHEDULER_STATE_H_
#define TANDEM_COORDINATOR_SCHEDULER_SCHEDULER_STATE_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/decoding/beam_search.h"
#include "coordinator/decoding/draft_state.h"
#include "coordinator/scheduler/scheduler.h"
#include "engine/sampling/stop_checker.h"
#include "engine/tokenizer/incremental_detokenizer.h"

namespace tandem::coordinator {

using Clock = std::chrono::steady_clock;

// Where a sequence is. kPending: created, not queued (an n > 1 completion
// before its parent forks it); kWaiting: in the waiting queue, not in the KV
// cache (new or preempted); kRunning: in the KV cache; kFinished: done, its
// blocks released.
enum class SequenceStatus { kPending, kWaiting, kRunning, kFinished };

// What a sequence is for. kCompletion: one of the request's n completions;
// kForkParent: (n > 1) prefills the shared prompt, then forks the
// completions; kBeam: one running beam of a beam search.
enum class SequenceRole { kCompletion, kForkParent, kBeam };

struct Scheduler::Sequence {
  RequestState* request = nullptr;
  SequenceRole role = SequenceRole::kCompletion;
  SequenceStatus status = SequenceStatus::kPending;
  int32_t index = 0;            // completion index (beams: a fresh one); the RNG stream
  SeqId id;                     // changes on every admission to the KV cache
  std::vector<int32_t> tokens;  // prompt + generated
  int32_t prompt_len = 0;
  int32_t num_computed = 0;     // tokens whose K/V are in the cache
  int32_t scheduled = 0;        // tokens computed by the step in flight
  DraftState draft;
  // Beam search: after its sampling step a beam holds its candidates until
  // every beam of the request has them.
  std::optional<std::vector<BeamCandidate>> beam_candidates;
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detokenizer;  // completions only
  std::unique_ptr<sampling::StopChecker> stop_checker;             // completions only
  Completion completion;

  bool fork_parent() const { return role == SequenceRole::kForkParent; }
  bool beam() const { return role == SequenceRole::kBeam; }
  bool running() const { return status == SequenceStatus::kRunning; }
  bool finished() const { return status == SequenceStatus::kFinished; }
  // Tokens this sequence must compute before it can sample (the parent stops
  // one short of the prompt: each child computes the last token itself).
  int32_t target() const {
    return fork_parent() ? prompt_len - 1 : static_cast<int32_t>(tokens.size());
  }
  // Decoding: every token but the last is in the cache.
  bool decoding() const { return num_computed == static_cast<int32_t>(tokens.size()) - 1; }
  // May get drafts this step: it speculates, decodes, and is not a fork
  // parent or a beam waiting for its siblings.
  bool CanPropose() const {
    return draft.active && !finished() && !fork_parent() && !beam_candidates.has_value() &&
           decoding();
  }
};

// Verification rounds, draft tokens verified and those accepted.
struct Scheduler::SpeculationCounts {
  int64_t rounds = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;

  void Add(const SpeculationCounts& other) {
    rounds += other.rounds;
    draft_tokens += other.draft_tokens;
    accepted_tokens += other.accepted_tokens;
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
  uint64_t next_beam_stream = 0;
  // Speculative decoding: the params drafts are proposed with (the target's,
  // greedy: deterministic drafts keep verification exact and cheap).
  sampling::SamplingParams draft_params;
  SpeculationCounts speculation;
  // Rounds whose draft at position i (0-based) was accepted; a round accepts
  // a prefix of its drafts.
  std::vector<int64_t> accepted_per_position;
  int32_t num_unfinished = 0;
  int64_t prefix_hit_tokens = 0;
  // params.prompt_logprobs >= 0: prompt positions 1.. as the worker scored
  // them, sent with the request's first delta.
  std::vector<PositionLogprobs> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  bool done = false;
  absl::Status status;  // why the request failed; OK otherwise
  // Migration: times resumed on a scheduler after an eviction, the failure
  // that evicted it last, and its strikes (MigratingRequest::num_strikes)
  // with the tokens it held at the last one.
  int32_t num_migrations = 0;
  absl::Status eviction_cause;
  int32_t num_strikes = 0;
  int64_t tokens_at_strike = 0;
};

// One step as Schedule() built it: the plan for the worker group and the
// sequences it computes, in plan order (Apply matches results to them).
struct Scheduler::ScheduledStep {
  worker::StepPlan plan;
  std::vector<Sequence*> sequences;

  bool empty() const {
    return plan.sequences.empty() && plan.finished.empty() && plan.new_sequences.empty();
  }
};

// Priority first (higher first), then arrival (earlier first).
// (A template: the nested Sequence type is private to Scheduler.)
template <typename S>
inline bool RunsBefore(const S* a, const S* b) {
  if (a->request->request.priority != b->request->request.priority) {
    return a->request->request.priority > b->request->request.priority;
  }
  return a->request->arrival < b->request->arrival;
}

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SCHEDULER_SCHEDULER_STATE_H_
