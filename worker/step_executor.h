// StepExecutor: runs StepPlans on one model replica (a ModelRunner on the CPU
// or a GPU). It sizes the runner's KV cache (never the bookkeeping: block ids
// come in the plan) and holds each live sequence's
// history for logits processing, and the sampler. The in-process WorkerGroup
// and the gRPC worker service both drive one of these.
//
// Thread-safety: Execute calls must be serialized (one step at a time).
#ifndef TANDEM_WORKER_STEP_EXECUTOR_H_
#define TANDEM_WORKER_STEP_EXECUTOR_H_

#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative_verifier.h"
#include "worker/api/step_plan.h"

namespace tandem::worker {

struct StepExecutorConfig {
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  // Ids that end generation (EOS and end-of-turn tokens): masked while a
  // sequence is below its min_tokens.
  std::vector<int32_t> eos_token_ids;
  // false on tensor-parallel ranks other than 0: Execute runs the forward
  // (its shard, taking part in the collectives) without the output head and
  // samples nothing, returning no per-sequence results.
  bool sample = true;
};

class StepExecutor {
 public:
  // Resets the runner's KV cache to `config.num_blocks` blocks. `runner`
  // must outlive the executor, and only one executor uses it at a time.
  // Fails as ModelRunner::ResetKvCache.
  static absl::StatusOr<std::unique_ptr<StepExecutor>> Create(model::ModelRunner* runner,
                                                              const StepExecutorConfig& config);
  // The same on the CPU: the executor owns a CpuModelRunner over `model`,
  // which must outlive it.
  static absl::StatusOr<std::unique_ptr<StepExecutor>> Create(model::Model* model,
                                                              const StepExecutorConfig& config);

  // Applies the plan: forgets finished sequences, registers new ones, performs
  // block copies, runs one forward over every sequence step and samples the
  // sequences that ask for it. A step with num_draft_tokens = g > 0 gets
  // logits for its last g+1 positions and is verified (SpeculativeVerifier):
  // its result carries the accepted drafts and the token after them. Every
  // emitted token is appended to the sequence's history; beam rows (drafts
  // included) return candidates instead. A sequence whose params ask for
  // prompt logprobs gets the logits of every row of its prompt chunks, and
  // the prompt tokens they score come back in StepResult::prompt_logprobs.
  // On error (a new sequence already
  // live, an unknown sequence id, invalid tokens, block ids or draft fields)
  // nothing is sampled and no history grows, but the plan's finished and new
  // sequences, applied first, stay applied.
  absl::StatusOr<StepResult> Execute(const StepPlan& plan);

  int32_t num_live_sequences() const { return static_cast<int32_t>(sequences_.size()); }

 private:
  struct SequenceState {
    std::vector<int32_t> prompt_tokens;
    std::vector<int32_t> output_tokens;
    sampling::SamplingParams params;
    uint64_t seed = 0;
    uint64_t stream = 0;
  };

  StepExecutor(model::ModelRunner* runner, std::unique_ptr<model::ModelRunner> owned_runner,
               const StepExecutorConfig& config);

  // Execute's phases, in order.
  // Forgets plan.finished, registers plan.new_sequences (InvalidArgument for
  // one already live) and performs plan.copies (InvalidArgument for a block
  // outside the cache, before any copy).
  absl::Status ApplyPlanBookkeeping(const StepPlan& plan);
  // Fills batch_ with plan.sequences and returns their states, in plan
  // order. InvalidArgument for a sequence not live or invalid draft fields.
  absl::StatusOr<std::vector<SequenceState*>> BuildBatch(const StepPlan& plan);
  // Runs the forward over batch_ (logits into `logits` unless null) and
  // records its time and token count in `timings`.
  absl::Status RunForward(const StepPlan& plan, float* logits, StepTimings& timings);
  // Whether this step samples (and verifies drafts) on the runner's device:
  // the runner can, and no sequence scores prompt positions (those need
  // host logits).
  bool SamplesOnDevice(const StepPlan& plan) const;
  // One sampling row per position of each verify row (g drafts: g + 1
  // rows), appended to `rows`: position i reads the target's logits after
  // draft i with the history through it (kept in `histories`) and carries
  // draft i + 1 to verify; the last, the bonus position, none.
  void AppendVerifyPositions(std::span<const sampling::VerifyRow> verify_rows,
                             std::vector<sampling::SamplingRow>& rows,
                             std::vector<std::vector<int32_t>>& histories);
  // The verifier's results from those positions' results, in the same
  // order: the drafts accepted up to the first rejection, then its
  // correction (or the bonus token) — what VerifyBatch returns.
  static std::vector<sampling::VerifyResult> FoldVerifyPositions(
      std::span<const sampling::VerifyRow> verify_rows,
      std::span<sampling::SampleResult> positions);
  // The forward with sampling on the device (ModelRunner::ForwardSample);
  // rows it leaves to the host are sampled (verification positions:
  // verified) here from their copied logits.
  // `rows` point into logits_ (BuildRows), which gives their logits rows.
  absl::Status ForwardSampleOnDevice(const StepPlan& plan,
                                     std::span<const sampling::SamplingRow> rows,
                                     std::span<sampling::SampleResult> samples,
                                     StepTimings& timings);
  // The sampler's and the verifier's rows for the sampling rows of the plan
  // (rows with drafts of non-beam sequences are verified). A beam sequence's
  // history is first made the coordinator's (see SyncBeamHistory).
  void BuildRows(const StepPlan& plan, std::span<SequenceState* const> states,
                 std::vector<sampling::SamplingRow>& sample_rows,
                 std::vector<sampling::VerifyRow>& verify_rows);
  // Prompt positions step `s` scores for a sequence that asks for prompt
  // logprobs: those of its tokens still followed by a prompt token.
  static int32_t NumPromptRows(const SequenceStep& s, const SequenceState& state);
  // The prompt logprobs of every sequence with prompt rows, in plan order.
  std::vector<PromptLogprobs> ScorePrompts(const StepPlan& plan,
                                           std::span<SequenceState* const> states);
  // A row of `state` reading `logits` with the sequence's whole history.
  sampling::SamplingRow RowOf(const SequenceState& state, const float* logits) const;
  // One result per sampling row of the plan, from the sampler's `samples`
  // and the verifier's `verified` in BuildRows' order; a non-beam sequence's
  // emitted tokens join its history.
  std::vector<SequenceResult> CollectResults(const StepPlan& plan,
                                             std::span<SequenceState* const> states,
                                             std::span<sampling::SampleResult> samples,
                                             std::span<sampling::VerifyResult> verified);

  std::unique_ptr<model::ModelRunner> owned_runner_;  // may be null
  model::ModelRunner* runner_;
  model::Model* model_;  // runner_->model()
  StepExecutorConfig config_;
  sampling::Sampler sampler_;
  sampling::SpeculativeVerifier verifier_;
  absl::flat_hash_map<SeqId, SequenceState> sequences_;
  std::vector<model::ForwardSequence> batch_;
  // Per batch entry: its first row in logits_, and its prompt rows (the
  // first prompt_rows_ of its rows).
  std::vector<int64_t> logit_row_begin_;
  std::vector<int32_t> prompt_rows_;
  std::vector<float> logits_;  // [rows, vocab]
};

}  // namespace tandem::worker

#endif  // TANDEM_WORKER_STEP_EXECUTOR_H_
