// StepDecoder: the worker side of the TargetWorker protocol. Rebuilds native
// StepPlans (with full block tables) from the diff-carrying StepRequests the
// coordinator's StepEncoder (protocol/step_encoder.h) produces. Diff rules:
// docs/protocol.md.
#ifndef TANDEM_PROTOCOL_STEP_DECODER_H_
#define TANDEM_PROTOCOL_STEP_DECODER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "common/strong_id.h"
#include "tandem/v1/worker.pb.h"
#include "worker/api/step_plan.h"

namespace tandem::protocol {

struct StepDecoderConfig {
  int32_t vocab_size = 0;  // token ids must be in [0, vocab_size)
  int32_t num_blocks = 0;  // block ids must be in [0, num_blocks)
  int32_t block_size = 0;  // positions per block, for the table coverage check
};

// Holds, per live sequence, the block table the coordinator has sent so far,
// and turns each StepRequest back into the StepPlan the coordinator encoded
// (exactly: same ids, tokens, params, full tables, copies, in the same order).
//
// Decode validates the whole request before changing any state, so a rejected
// request leaves the decoder as it was. Thread-safety: none; the worker's
// step loop owns it (steps are sequential by protocol).
class StepDecoder {
 public:
  // CHECK-fails unless every config field is >= 1 (they come from the loaded
  // model, not from a request).
  explicit StepDecoder(const StepDecoderConfig& config);
  StepDecoder(const StepDecoder&) = delete;
  StepDecoder& operator=(const StepDecoder&) = delete;

  // Applies the request's diffs and returns the full plan. InvalidArgument,
  // naming the offending value and the limit, when: a new sequence is already
  // live (or listed twice); a step names a sequence that is not live, or one
  // sequence twice; a token or block id is out of range; truncate_blocks_to
  // exceeds the current table; the resulting table does not cover
  // start_pos + tokens; a step computes no tokens; start_pos < 0; sampling
  // params fail ValidateSamplingParams; the draft fields fail
  // ValidateDraftFields (num_draft_tokens outside [0, len(tokens) - 1] or
  // without sample, draft_probs not one per draft token, a probability out
  // of range, a support token out of range or not paired with a probability,
  // the draft token missing from its support). Finished ids the decoder does not
  // hold are ignored (a fork parent served wholly from the prefix cache is
  // released without ever having been sent).
  absl::StatusOr<worker::StepPlan> Decode(const tandem::v1::StepRequest& request);

  // Forgets every sequence (TargetWorker.Reset).
  void Reset() { tables_.clear(); }

  // Live sequences.
  int32_t num_sequences() const { return static_cast<int32_t>(tables_.size()); }

 private:
  absl::Status CheckTokens(const google::protobuf::RepeatedField<int32_t>& tokens,
                           const char* what, int64_t seq_id) const;
  absl::Status CheckBlock(int32_t block, const char* what, int64_t seq_id) const;
  // One new sequence (its prompt and sampling from `shared` when not null:
  // same_prompt_as) / one sequence's step (`base`: its table so far),
  // validated; the error names the sequence, the value and the limit.
  absl::Status DecodeNewSequence(const tandem::v1::NewSequence& ns,
                                 const worker::NewSequence* shared,
                                 worker::NewSequence& out) const;
  absl::Status DecodeSequenceStep(const tandem::v1::SequenceStep& s,
                                  const std::vector<BlockId>& base,
                                  worker::SequenceStep& out) const;

  StepDecoderConfig config_;
  absl::flat_hash_map<SeqId, std::vector<BlockId>> tables_;
};

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_STEP_DECODER_H_
