// StepPlan / StepResult: one scheduler iteration for one worker group, in
// native form, with full block tables. On the wire (tandem.v1.StepRequest,
// see docs/protocol.md) coordinator::StepEncoder turns successive plans into
// diffs — new sequences once, then only new tokens and new block ids — and
// worker::StepDecoder rebuilds the full plans on the worker.
#ifndef TANDEM_WORKER_API_STEP_PLAN_H_
#define TANDEM_WORKER_API_STEP_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/strong_id.h"
#include "engine/kv/kv_manager.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"
#include "engine/sampling/speculative_verifier.h"

namespace tandem::worker {

// A sequence the worker has not seen: its history (for penalties, min_tokens
// and the RNG step counter) and how to sample it.
struct NewSequence {
  SeqId id;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> output_tokens;  // non-empty when re-admitted after preemption
  sampling::SamplingParams params;
  uint64_t seed = 0;
  uint64_t stream = 0;  // sample index within the request (n > 1)
};

// The work of one sequence in this step.
struct SequenceStep {
  SeqId id;
  std::vector<int32_t> tokens;         // tokens whose K/V this step computes
  int32_t start_pos = 0;               // position of tokens[0]
  std::vector<BlockId> block_table;    // covers [0, start_pos + tokens.size())
  bool sample = false;                 // sample the next token after the last one
  // Speculative verification: the last num_draft_tokens of `tokens` are draft
  // tokens d_1..d_g, in [0, tokens.size() - 1], g > 0 only with `sample`.
  // The forward computes logits for the last g+1 positions and the worker
  // emits the accepted prefix of the drafts plus one token
  // (sampling/speculative_verifier.h); a beam sequence is not verified: it
  // gets its candidates after the token and after each draft
  // (SequenceResult::draft_beam_candidates). Draft K/V past what is kept
  // stays in the blocks and is overwritten by a later step.
  int32_t num_draft_tokens = 0;
  std::vector<sampling::DraftProbs> draft_probs;  // one per draft token: q at d_i
};

// OK when the verification fields of `step` are consistent: num_draft_tokens
// in [0, tokens.size() - 1], > 0 only with `sample`, one draft_probs entry
// per draft token, each passing sampling::ValidateDraftProbs for its token.
// Otherwise InvalidArgument naming the sequence, the value and the limit.
// (Whether the sequence may verify at all — not a beam — is the executor's
// check: only it knows the sequence's params.)
absl::Status ValidateDraftFields(const SequenceStep& step, int32_t vocab_size);

struct StepPlan {
  int64_t step_id = 0;
  std::vector<SeqId> finished;          // forget these sequences first
  std::vector<NewSequence> new_sequences;
  std::vector<kv::BlockCopy> copies;    // copy-on-write, before the forward
  std::vector<SequenceStep> sequences;
};

struct SequenceResult {
  SeqId id;
  // The sampled token; after a verification, the token emitted after the
  // accepted drafts (the correction at the first rejection, or the bonus).
  sampling::SampleResult sample;
  // Verification only: the accepted draft tokens d_1..d_k in order, with
  // their logprobs. The step emitted accepted_drafts + [sample]; the
  // coordinator drops its bookkeeping of the rejected positions.
  std::vector<sampling::SampleResult> accepted_drafts;
  // Beam sequences with drafts only: the candidates after each draft token
  // d_1..d_g (sample.beam_candidates are those after the step's token), so
  // the coordinator can take several beam steps along drafts the search
  // follows without another forward.
  std::vector<std::vector<sampling::BeamToken>> draft_beam_candidates;
};

// The prompt logprobs one step computed for one sequence whose params ask
// for them (SamplingParams::prompt_logprobs >= 0): one entry per prompt
// position p in [first_position, first_position + tokens.size()), scoring
// prompt token p under the model's distribution after positions < p. A
// prompt chunk scores the positions after each of its tokens that are
// still in the prompt; position 0 is never scored.
struct PromptLogprobs {
  SeqId id;
  int32_t first_position = 1;
  std::vector<sampling::SampleResult> tokens;  // token, logprob, top_logprobs
};

struct StepTimings {
  double forward_ms = 0;
  double sample_ms = 0;
  double total_ms = 0;
  int64_t num_tokens = 0;  // tokens computed by the forward
};

struct StepResult {
  int64_t step_id = 0;
  std::vector<SequenceResult> results;  // one per sequence with sample = true, in plan order
  // One per sequence whose step scored prompt positions, in plan order.
  std::vector<PromptLogprobs> prompt_logprobs;
  StepTimings timings;
};

}  // namespace tandem::worker

#endif  // TANDEM_WORKER_API_STEP_PLAN_H_
