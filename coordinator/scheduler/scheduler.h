// Scheduler: continuous (iteration-level) batching for one worker group.
// Each Step() is Schedule() -> WorkerGroup::Step -> Apply(): Schedule builds
// one StepPlan within a token budget — decode tokens (with their drafts)
// first, then prefill chunks (chunked prefill) of waiting sequences, admitted
// by free KV blocks in priority-then-FCFS order — and Apply folds the result
// into requests with one fold per mode (sampling: detokenization, stop
// conditions, logprobs; speculative verification; beam search). It owns the
// group's KV bookkeeping (KvManager): allocation, copy-on-write, prefix
// cache. When blocks run out, the lowest-priority, latest sequence is
// preempted and later recomputed (its prefix-cached blocks make that cheap).
// A request with n > 1 prefills its prompt once and forks n sequences that
// share the prompt's blocks. A step the group fails fails the requests it
// carried with the group's status code — or, with migration on, evicts them
// whole (MigratingRequest) for another scheduler to Resume.
//
// Thread-safety: Submit and Cancel may be called from any thread; Step, the
// observer callbacks and the accessors run on the scheduler thread.
#ifndef TANDEM_COORDINATOR_SCHEDULER_SCHEDULER_H_
#define TANDEM_COORDINATOR_SCHEDULER_SCHEDULER_H_

#include <atomic>
#include <deque>
#include <optional>
#include <span>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/api/request.h"
#include "coordinator/decoding/beam_search.h"
#include "coordinator/decoding/gamma_controller.h"
#include "coordinator/scheduler/draft_pool.h"
#include "coordinator/scheduler/worker_group.h"
#include "engine/kv/kv_manager.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace tandem::coordinator {

class MigratingRequest;

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 1024;  // token budget of one step
  int32_t max_num_seqs = 256;             // sequences in one step
  bool enable_prefix_cache = true;
};

// InvalidArgument naming the field when a limit is below 1.
absl::Status ValidateSchedulerConfig(const SchedulerConfig& config);

// Speculative decoding (see Scheduler::set_draft_pool).
struct SpeculationConfig {
  // Draft tokens per round: > 0 fixed, 0 = auto (GammaController decides
  // per sequence and step, up to max_gamma, and stops speculating when it
  // would slow the batch down).
  int32_t num_speculative_tokens = 0;
  GammaControllerConfig auto_gamma;
  // History tokens one round may send to the draft to catch up (prompts of
  // new sequences, mostly). Propose runs before the step and holds it, so a
  // batch of new prompts is fed to the draft in chunks of at most this many
  // over the next rounds instead of in one long call (which would stall the
  // step and could miss the draft's RPC deadline).
  int32_t max_draft_prefill_tokens = 512;
};

// "N" (N >= 1) or "auto" -> SpeculationConfig::num_speculative_tokens.
// InvalidArgument naming the text and the accepted forms.
absl::StatusOr<int32_t> ParseNumSpeculativeTokens(const std::string& text);

struct SchedulerStats {
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t num_prompt_tokens_computed = 0;
  int64_t num_generated_tokens = 0;
  // Steps that ran a plan on the worker group and succeeded, and their wall
  // time here (scheduling, the group's Step, folding results) against the
  // time the group reported inside its steps (StepTimings total_ms): the
  // difference is the coordinator<->worker overhead.
  int64_t num_steps_ok = 0;
  double step_ms = 0;
  double worker_step_ms = 0;
  double forward_ms = 0;
  // Speculative decoding: rounds (a sequence verified drafts in a step),
  // draft tokens verified, and those accepted.
  int64_t num_speculative_rounds = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  // Copy-on-write block copies ordered, and beam sequences forked.
  int64_t num_block_copies = 0;
  int64_t num_beam_forks = 0;
};

// Most prompt tokens one step computes for a request that asks for prompt
// logprobs: each returns a row of logits ([tokens, vocab] floats).
inline constexpr int32_t kMaxPromptLogprobChunk = 512;

class Scheduler {
 public:
  // `group`, `tokenizer` and `observer` must outlive the scheduler; `config`
  // must pass ValidateSchedulerConfig (CHECKed).
  Scheduler(const SchedulerConfig& config, WorkerGroup* group,
            const tokenizer::Tokenizer* tokenizer, RequestObserver* observer);
  ~Scheduler();

  // Validates the request against the model (token ids, prompt length vs the
  // context, sampling parameters, KV capacity) and queues it. Errors are
  // InvalidArgument / ResourceExhausted naming the value and the limit.
  absl::Status Submit(GenerateRequest request);
  // Cancels a queued or running request: its sequences release their blocks
  // in the next step and it finishes with kCancelled. Unknown ids are ignored.
  void Cancel(RequestId id);

  // Migration (scheduler_migration.cc). With `on`, a failed step evicts the
  // requests it carried instead of failing them: each leaves this scheduler
  // whole — prompt, generated tokens, seed, streamed text and stop state,
  // beams, counters — with its KV released, for TakeEvicted. Scheduler
  // thread, before the first Step.
  void set_evict_on_failure(bool on) { evict_on_failure_ = on; }
  // The requests evicted since the last call (scheduler thread).
  std::vector<MigratingRequest> TakeEvicted();
  // Evicts every request queued or running here (for TakeEvicted) without
  // charging them a strike: the group is down, nothing ran. Scheduler thread.
  void EvictAll(const absl::Status& cause);
  // Takes over a request another scheduler evicted: at the next step its
  // live sequences queue to recompute prompt + generated tokens (the prefix
  // cache shares what it can) and go on sampling at the same RNG position,
  // so its output continues exactly where it stopped. Any thread. The
  // request counts one more migration.
  void Resume(MigratingRequest request);
  // Ends an evicted request that will not run again: kCancelled or kError
  // (with `status`), reported to the observer as if it ended here.
  // Scheduler thread.
  void Finish(MigratingRequest request, FinishReason reason, const absl::Status& status);

  // Runs one iteration. Returns false when there was nothing to do. A worker
  // error fails every request in the step (and is returned).
  absl::StatusOr<bool> Step();
  // True while any request is queued or running.
  bool HasWork() const;

  // Requests submitted and not yet finished (queued, waiting or running): the
  // load the router balances. Any thread; updated as requests come and go.
  int64_t load() const { return num_outstanding_.load(std::memory_order_relaxed); }

  // Forgets every KV block, the prefix cache included, after the worker
  // group was reset (a reconnected worker holds no KV). Scheduler thread;
  // requires that no sequence is in the cache (the failed steps before the
  // reconnect failed them all; CHECKed).
  void ResetKvCache();

  // Speculative decoding for the sampling requests that do not turn it off:
  // each step, decoding sequences first get proposals from `pool` (which
  // must outlive the scheduler), then the worker verifies them with the
  // sequence's token (exact speculative sampling). Scheduler thread, before
  // the first Step.
  void set_draft_pool(DraftPool* pool, const SpeculationConfig& config);

  const SchedulerStats& stats() const { return stats_; }
  // Requests with a sequence in the running batch, and the others queued
  // or waiting for KV blocks (scheduler thread).
  int64_t NumRequestsRunning() const;
  int64_t NumRequestsWaiting() const;
  kv::KvStats kv_stats() const { return kv_->stats(); }

  // A request's whole decoding state (scheduler_state.h; opaque elsewhere).
  struct RequestState;

 private:
  struct Sequence;
  struct ScheduledStep;
  struct SpeculationCounts;

  // Requests (scheduler.cc).
  void DrainInbox();
  void Admit(RequestState* request);
  void CancelRequest(RequestState* request);
  std::unique_ptr<Sequence> MakeSequence(RequestState* request, int32_t index,
                                         std::vector<int32_t> tokens);
  // Queues `seq` (not in the cache) in priority-then-arrival order.
  void EnqueueWaiting(Sequence* seq);
  // Releases the sequence's blocks and draft; it leaves every queue.
  void ReleaseSequence(Sequence* seq);
  void FinishSequence(Sequence* seq, FinishReason reason);
  void FailRequest(RequestState* request, const absl::Status& status);
  // Takes `request` out of this scheduler into evicted_: its sequences leave
  // the cache and the queues (DetachSequence), `cause` is kept. `charged`:
  // it ran in the step that failed, which counts a strike against it unless
  // it generated tokens since its last one.
  void Evict(RequestState* request, const absl::Status& cause, bool charged);
  // Releases the sequence's blocks and draft and takes it out of every
  // queue; a running sequence is left kWaiting (the caller decides what
  // follows).
  void DetachSequence(Sequence* seq);
  // The request's live sequences: fork parent, completions, beams.
  static std::vector<Sequence*> LiveSequences(RequestState* request);
  // Grows with every token the request generates (completions' tokens and
  // the beams' lengths): its progress between two evictions.
  static int64_t TokensGenerated(const RequestState* request);
  // Files an evicted request back in (DrainInbox): its waiting sequences
  // queue with a fresh draft state.
  void Adopt(std::unique_ptr<RequestState> request);
  void MaybeCompleteRequest(RequestState* request);
  void EraseDoneRequests();

  // Building a step (scheduler_schedule.cc). Schedule() returns the plan and
  // the sequences it computes; it never calls the worker group.
  ScheduledStep Schedule();
  // Running sequences first (decode tokens, unfinished prefills, drafts),
  // preempting from the back when blocks run out.
  void ScheduleRunning(ScheduledStep& step, int32_t& budget);
  // False when `seq` got no blocks: the caller preempts.
  bool TryScheduleRunning(ScheduledStep& step, Sequence* seq, int32_t& budget);
  // Then waiting sequences, admitted in order while budget and blocks allow.
  void ScheduleWaiting(ScheduledStep& step, int32_t& budget);
  // The plan's entry for a scheduled sequence.
  worker::SequenceStep SequenceStepOf(const Sequence* seq) const;
  // The worker's announcement of a sequence it has not seen.
  worker::NewSequence NewSequenceOf(const Sequence* seq) const;
  // Tokens `seq`, with `computed` tokens in the cache, may compute this step
  // within `budget`: a prompt chunk of a request that scores its prompt is
  // capped at kMaxPromptLogprobChunk (each of its tokens returns a row of
  // logits).
  static int32_t ChunkTokens(const Sequence* seq, int32_t computed, int32_t budget);
  void Preempt(Sequence* seq);
  void ForkChildren(Sequence* parent);
  // Gives `child` (same tokens as `parent`) a new id sharing the parent's
  // KV blocks copy-on-write, runs it, and announces it to the worker.
  void ForkInKv(Sequence* parent, Sequence* child);

  // Folding a step's result (scheduler_apply.cc): one fold per mode.
  void Apply(ScheduledStep& step, const worker::StepResult& result);
  // Stores a step's prompt logprobs in their requests (until sent).
  void ApplyPromptLogprobs(const absl::flat_hash_map<SeqId, Sequence*>& by_id,
                           std::span<const worker::PromptLogprobs> scored);
  // Sends `delta` to the observer; the request's first carries its prompt
  // logprobs.
  void EmitDelta(RequestState* r, CompletionDelta& delta);
  // Sampling: appends the token, streams its text, checks stop conditions.
  void ApplySample(Sequence* seq, const sampling::SampleResult& sample);
  // Stop reason after `token` (kNone: keep going); `delta.text` gets the
  // text it completes.
  FinishReason CheckStop(Sequence* seq, int32_t token, CompletionDelta& delta);
  // Beam search: the beam's candidates (and, with drafts, those after each).
  void ApplyBeam(Sequence* seq, const worker::SequenceResult& result);
  // A failed step fails every request it carried.
  void FailStep(const ScheduledStep& step, const absl::Status& status);

  // Beam search (scheduler_beam.cc, see coordinator/decoding/beam_search.h).
  void AdmitBeamSearch(RequestState* r);
  // Runs the request's beam step once every running beam has candidates:
  // forks, continues and releases beam sequences, or finishes the request.
  void AdvanceBeams(RequestState* r);
  // One beam step on the candidates: false once the search is done.
  bool TakeBeamStep(RequestState* r);
  // The beams after a step's moves: the first move of a parent reuses it,
  // later ones fork it; returns the old beams no move continued.
  std::vector<std::unique_ptr<Sequence>> MoveBeams(RequestState* r,
                                                   const std::vector<BeamMove>& moves);
  // Appends the move's token to beam `b`, along its draft when it follows it.
  void ExtendBeam(Sequence* b, int32_t token, worker::NewSequence* announced);
  // Once the beams of a speculative round left their drafts: counts what
  // was followed and rolls each draft back to it.
  void RollBackBeamDrafts(RequestState* r);
  // Streams the best beam so far (the whole text, replacing the last).
  void EmitBestBeam(RequestState* r, FinishReason reason);
  // Releases every beam; kNone → the finalized hypotheses are the
  // completions, else (cancel, error) the best beam so far with `forced`.
  void FinishBeamSearch(RequestState* r, FinishReason forced);
  std::string DecodeText(const std::vector<int32_t>& tokens) const;

  // Speculative decoding (scheduler_speculative.cc): asks the draft pool
  // for this step's proposals of the decoding sequences that speculate.
  void ProposeDrafts();
  // The draft request for `seq` at `gamma`, or nullopt when the draft lost it.
  std::optional<DraftRequest> DraftRequestOf(Sequence* seq, int32_t gamma);
  // Fits `d`'s catch-up tokens into this round's `prefill_left`: true when
  // it goes as it is; false when only a chunk of its history goes (gamma 1,
  // the proposal to be dropped: the draft is still behind), nullopt when
  // the budget is spent (the sequence waits for a later round).
  static std::optional<bool> FitCatchUp(DraftRequest& d, int64_t& prefill_left);
  // Gamma for `seq` this step (0: no drafts); `step_tokens` and
  // `step_sequences` describe the step the proposal joins.
  int32_t ChooseGamma(const Sequence* seq, int64_t step_tokens, int64_t step_sequences,
                      bool probing);
  // Auto gamma before the draft's cost is known: the sequence that probes it.
  Sequence* ChooseProbe() const;
  // Tells the gamma controller what this step's Propose call cost
  // (propose_ms_) unless it fed the draft history (a prompt) to catch up.
  void ObserveProposeCost(std::span<const DraftRequest> requests,
                          const std::vector<bool>& catching_up);
  // Verification: the accepted drafts' K/V stays, the rest is truncated,
  // the draft rolls back, and every emitted token is sampled into the
  // sequence in order.
  void ApplyVerify(Sequence* seq, const worker::SequenceResult& result);
  // Rolls back the drafts of sequences that did not make it into the step.
  void DropUnusedDrafts();
  // Rolls the draft of `seq` back to `keep` tokens (when it holds more); a
  // draft that fails stops speculating the sequence.
  void RollBackDraft(Sequence* seq, int32_t keep);
  // The draft forgets `seq` (finished, preempted or failed).
  void ForgetDraft(Sequence* seq);
  // Adds to the request's and the scheduler's speculation counters.
  void CountSpeculation(RequestState* r, const SpeculationCounts& counts);
  bool Speculates(const RequestState* r) const;

  SeqId NextSeqId() { return SeqId(next_seq_id_++); }

  SchedulerConfig config_;
  WorkerGroup* group_;
  const tokenizer::Tokenizer* tokenizer_;
  RequestObserver* observer_;
  std::optional<kv::KvManager> kv_;  // re-created by ResetKvCache
  std::vector<int32_t> eos_ids_;

  std::atomic<int64_t> num_outstanding_{0};

  mutable absl::Mutex inbox_mutex_;
  std::vector<GenerateRequest> inbox_ ABSL_GUARDED_BY(inbox_mutex_);
  std::vector<RequestId> cancels_ ABSL_GUARDED_BY(inbox_mutex_);
  std::vector<MigratingRequest> resumed_ ABSL_GUARDED_BY(inbox_mutex_);

  // Scheduler-thread state.
  int64_t next_seq_id_ = 1;
  int64_t next_step_id_ = 1;
  int64_t arrival_counter_ = 0;
  absl::flat_hash_map<RequestId, std::unique_ptr<RequestState>> requests_;
  std::vector<Sequence*> running_;   // in the KV cache
  std::deque<Sequence*> waiting_;    // not in the KV cache
  std::vector<SeqId> released_;      // to forget on the worker in the next plan
  std::vector<worker::NewSequence> pending_new_;  // forked children to announce in the next plan
  // Beam sequences dropped during a step, kept alive until the step ends
  // (the step's scheduled list may still point at them).
  std::vector<std::unique_ptr<Sequence>> retired_;
  DraftPool* draft_pool_ = nullptr;
  SpeculationConfig speculation_;
  GammaController gamma_controller_;
  // This step's Propose call (ms; 0 without one): the draft's cost, which
  // the controller models apart from the step's.
  double propose_ms_ = 0;
  SchedulerStats stats_;
  bool evict_on_failure_ = false;
  std::vector<MigratingRequest> evicted_;
};

// A request evicted from one Scheduler (its worker group failed) on its way
// to another's Resume, or to Finish. Move-only; owns the request's state.
class MigratingRequest {
 public:
  MigratingRequest();
  explicit MigratingRequest(std::unique_ptr<Scheduler::RequestState> state);
  ~MigratingRequest();
  MigratingRequest(MigratingRequest&&) noexcept;
  MigratingRequest& operator=(MigratingRequest&&) noexcept;

  RequestId id() const;
  std::span<const int32_t> prompt_tokens() const;
  // Times the request was resumed on a scheduler after an eviction.
  int32_t num_migrations() const;
  // Failed steps it ran in without generating a token in between: what
  // --max-migrations bounds (a request that breaks every group it runs on
  // is stopped; one that progresses across unrelated failures, or that only
  // waited on a group that went down, is not).
  int32_t num_strikes() const;
  // The failure that evicted it last.
  const absl::Status& cause() const;

 private:
  friend class Scheduler;
  std::unique_ptr<Scheduler::RequestState> state_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SCHEDULER_SCHEDULER_H_
