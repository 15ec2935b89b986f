#include "protocol/step_decoder.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "protocol/sampling_codec.h"

namespace tandem::protocol {

StepDecoder::StepDecoder(const StepDecoderConfig& config) : config_(config) {
  CHECK(config.vocab_size >= 1 && config.num_blocks >= 1 && config.block_size >= 1,
        "StepDecoderConfig needs vocab_size, num_blocks, block_size >= 1 (got %d, %d, %d)",
        config.vocab_size, config.num_blocks, config.block_size);
}

absl::Status StepDecoder::CheckTokens(const google::protobuf::RepeatedField<int32_t>& tokens,
                                      const char* what, int64_t seq_id) const {
  for (int i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: %s[%d] = %d is out of range: token ids must be in [0, %d)", seq_id, what,
          i, tokens[i], config_.vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::Status StepDecoder::CheckBlock(int32_t block, const char* what, int64_t seq_id) const {
  if (block < 0 || block >= config_.num_blocks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %d%s is out of range: block ids must be in [0, %d)", what, block,
        seq_id >= 0 ? absl::StrFormat(" (sequence %d)", seq_id) : std::string(),
        config_.num_blocks));
  }
  return absl::OkStatus();
}

absl::Status StepDecoder::DecodeNewSequence(const tandem::v1::NewSequence& ns,
                                            const worker::NewSequence* shared,
                                            worker::NewSequence& out) const {
  RETURN_IF_ERROR(CheckTokens(ns.prompt_tokens(), "prompt_tokens", ns.seq_id()));
  RETURN_IF_ERROR(CheckTokens(ns.output_tokens(), "output_tokens", ns.seq_id()));
  out.id = SeqId(ns.seq_id());
  out.output_tokens.assign(ns.output_tokens().begin(), ns.output_tokens().end());
  if (shared != nullptr) {
    out.prompt_tokens = shared->prompt_tokens;
    out.params = shared->params;
  } else {
    out.prompt_tokens.assign(ns.prompt_tokens().begin(), ns.prompt_tokens().end());
    out.params = SamplingParamsFromProto(ns.sampling());
  }
  out.params.beam_candidates = ns.beam_candidates();
  out.params.beam_sample = ns.beam_sample();
  absl::Status valid = sampling::ValidateSamplingParams(out.params, config_.vocab_size);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sequence %d: %s", ns.seq_id(), valid.message()));
  }
  out.seed = ns.seed();
  out.stream = ns.stream();
  return absl::OkStatus();
}

absl::Status StepDecoder::DecodeSequenceStep(const tandem::v1::SequenceStep& s,
                                             const std::vector<BlockId>& base,
                                             worker::SequenceStep& out) const {
  if (s.tokens_size() == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d computes no tokens: a step needs at least 1", s.seq_id()));
  }
  if (s.start_pos() < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d: start_pos %d is out of range: must be >= 0", s.seq_id(), s.start_pos()));
  }
  RETURN_IF_ERROR(CheckTokens(s.tokens(), "tokens", s.seq_id()));
  size_t keep = base.size();
  if (s.has_truncate_blocks_to()) {
    if (s.truncate_blocks_to() < 0 || static_cast<size_t>(s.truncate_blocks_to()) > base.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: truncate_blocks_to %d is out of range: the worker's table has %d blocks",
          s.seq_id(), s.truncate_blocks_to(), base.size()));
    }
    keep = static_cast<size_t>(s.truncate_blocks_to());
  }
  for (int32_t b : s.new_block_ids()) RETURN_IF_ERROR(CheckBlock(b, "new block id", s.seq_id()));
  out.id = SeqId(s.seq_id());
  out.tokens.assign(s.tokens().begin(), s.tokens().end());
  out.start_pos = s.start_pos();
  out.block_table.reserve(keep + s.new_block_ids_size());
  out.block_table.assign(base.begin(), base.begin() + static_cast<ptrdiff_t>(keep));
  for (int32_t b : s.new_block_ids()) out.block_table.push_back(BlockId(b));
  out.sample = s.sample();
  out.num_draft_tokens = s.num_draft_tokens();
  out.draft_probs.reserve(s.draft_probs_size());
  for (const tandem::v1::DraftProbs& q : s.draft_probs()) {
    out.draft_probs.push_back(DraftProbsFromProto(q));
  }
  RETURN_IF_ERROR(worker::ValidateDraftFields(out, config_.vocab_size));
  const int64_t end = int64_t{s.start_pos()} + s.tokens_size();
  const int64_t covered = static_cast<int64_t>(out.block_table.size()) * config_.block_size;
  if (covered < end) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d: block table of %d blocks covers %d positions but the step writes up to "
        "position %d (block_size %d)",
        s.seq_id(), out.block_table.size(), covered, end, config_.block_size));
  }
  return absl::OkStatus();
}

absl::StatusOr<worker::StepPlan> StepDecoder::Decode(const tandem::v1::StepRequest& request) {
  worker::StepPlan plan;
  plan.step_id = request.step_id();
  // Validation pass: nothing in tables_ changes until the whole request is
  // known to be consistent.
  absl::flat_hash_set<SeqId> finished;
  for (int64_t id : request.finished_seq_ids()) {
    plan.finished.push_back(SeqId(id));
    finished.insert(SeqId(id));
  }
  auto held = [&](SeqId id) { return tables_.contains(id) && !finished.contains(id); };
  absl::flat_hash_set<SeqId> added;
  for (const tandem::v1::NewSequence& ns : request.new_sequences()) {
    if (held(SeqId(ns.seq_id())) || !added.insert(SeqId(ns.seq_id())).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: new sequence %d is already live on this worker", request.step_id(),
          ns.seq_id()));
    }
    const worker::NewSequence* shared = nullptr;
    if (ns.has_same_prompt_as()) {
      auto it = std::find_if(plan.new_sequences.begin(), plan.new_sequences.end(),
                             [&](const worker::NewSequence& earlier) {
                               return earlier.id.value() == ns.same_prompt_as();
                             });
      if (it == plan.new_sequences.end() || ns.prompt_tokens_size() > 0 || ns.has_sampling()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "step %d: new sequence %d: same_prompt_as %d must name an earlier new sequence of "
            "this step, with no prompt_tokens or sampling of its own",
            request.step_id(), ns.seq_id(), ns.same_prompt_as()));
      }
      shared = &*it;
    }
    worker::NewSequence decoded;
    RETURN_IF_ERROR(DecodeNewSequence(ns, shared, decoded));
    plan.new_sequences.push_back(std::move(decoded));
  }
  for (const tandem::v1::BlockCopy& c : request.copies()) {
    RETURN_IF_ERROR(CheckBlock(c.src_block_id(), "block copy source", -1));
    RETURN_IF_ERROR(CheckBlock(c.dst_block_id(), "block copy destination", -1));
    plan.copies.push_back({BlockId(c.src_block_id()), BlockId(c.dst_block_id())});
  }
  static const std::vector<BlockId> kEmpty;
  absl::flat_hash_set<SeqId> stepped;
  for (const tandem::v1::SequenceStep& s : request.sequences()) {
    const SeqId id(s.seq_id());
    if (!added.contains(id) && !held(id)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: sequence %d is not live on this worker (never sent as new, or finished)",
          request.step_id(), s.seq_id()));
    }
    if (!stepped.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: sequence %d appears twice in the batch", request.step_id(), s.seq_id()));
    }
    const std::vector<BlockId>& base = added.contains(id) ? kEmpty : tables_.find(id)->second;
    RETURN_IF_ERROR(DecodeSequenceStep(s, base, plan.sequences.emplace_back()));
  }
  // Commit: the request is consistent; apply it in protocol order.
  for (SeqId id : plan.finished) tables_.erase(id);
  for (const worker::NewSequence& ns : plan.new_sequences) tables_[ns.id].clear();
  for (const worker::SequenceStep& s : plan.sequences) tables_[s.id] = s.block_table;
  return plan;
}

}  // namespace tandem::protocol
