// StepEncoder: the coordinator side of the TargetWorker protocol. Turns the
// scheduler's native StepPlans (which carry full block tables) into
// StepRequests that carry only what the worker group does not already hold:
// a new sequence's history once, then per step its new tokens and the block
// ids appended to its table since the last step. The worker's StepDecoder
// (protocol/step_decoder.h) inverts it. Diff rules: docs/protocol.md.
#ifndef TANDEM_PROTOCOL_STEP_ENCODER_H_
#define TANDEM_PROTOCOL_STEP_ENCODER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/strong_id.h"
#include "tandem/v1/worker.pb.h"
#include "worker/api/step_plan.h"

namespace tandem::protocol {

// One per worker group: remembers, per sequence, the block table the group
// was last sent, and forgets sequences once their finish has been encoded.
//
// Encode validates the whole plan before changing state, so a rejected plan
// leaves the encoder as it was. If the Step RPC carrying an encoded request
// fails, the encoder and the worker disagree: call Reset here and
// TargetWorker.Reset there, and re-admit the group's sequences as new.
// Thread-safety: none; the scheduler thread owns it.
class StepEncoder {
 public:
  StepEncoder() = default;
  StepEncoder(const StepEncoder&) = delete;
  StepEncoder& operator=(const StepEncoder&) = delete;

  // Encodes `plan`. Each sequence's table is sent as a diff against the table
  // last sent: the longest common prefix is kept (truncate_blocks_to set only
  // when the old table is not a prefix of the new one), the rest is sent as
  // new_block_ids. InvalidArgument, naming the sequence, when the plan adds a
  // sequence that is still live (not in `finished`) or lists it twice in
  // new_sequences, or steps a sequence that is neither live nor new, or
  // steps one sequence twice. Ids in `finished` are passed through as they
  // are, held or not.
  absl::StatusOr<tandem::v1::StepRequest> Encode(const worker::StepPlan& plan);

  // Forgets every sequence (pairs with TargetWorker.Reset).
  void Reset() { sent_tables_.clear(); }

  // Sequences the worker group holds, as far as this encoder knows.
  int32_t num_sequences() const { return static_cast<int32_t>(sent_tables_.size()); }

 private:
  absl::flat_hash_map<SeqId, std::vector<BlockId>> sent_tables_;
};

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_STEP_ENCODER_H_
