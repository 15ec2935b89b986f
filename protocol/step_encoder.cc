#include "protocol/step_encoder.h"

#include "protocol/sampling_codec.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace tandem::protocol {
namespace {

// True when `ns` has `full`'s prompt and, once encoded, its sampling.
bool SharesPrompt(const tandem::v1::NewSequence& full, const worker::NewSequence& ns,
                  const tandem::v1::SamplingParams& sampling) {
  return std::equal(full.prompt_tokens().begin(), full.prompt_tokens().end(),
                    ns.prompt_tokens.begin(), ns.prompt_tokens.end()) &&
         google::protobuf::util::MessageDifferencer::Equals(full.sampling(), sampling);
}

}  // namespace

absl::StatusOr<tandem::v1::StepRequest> StepEncoder::Encode(const worker::StepPlan& plan) {
  // Validation pass: sent_tables_ changes only once the plan is consistent.
  absl::flat_hash_set<SeqId> finished(plan.finished.begin(), plan.finished.end());
  auto held = [&](SeqId id) { return sent_tables_.contains(id) && !finished.contains(id); };
  absl::flat_hash_set<SeqId> added;
  for (const worker::NewSequence& ns : plan.new_sequences) {
    if (held(ns.id) || !added.insert(ns.id).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: new sequence %d is already live on the worker group (not finished first)",
          plan.step_id, ns.id.value()));
    }
  }
  absl::flat_hash_set<SeqId> stepped;
  for (const worker::SequenceStep& s : plan.sequences) {
    if (!added.contains(s.id) && !held(s.id)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: sequence %d is neither live on the worker group nor new in this step",
          plan.step_id, s.id.value()));
    }
    if (!stepped.insert(s.id).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: sequence %d appears twice in the batch", plan.step_id, s.id.value()));
    }
  }

  tandem::v1::StepRequest request;
  request.set_step_id(plan.step_id);
  request.mutable_finished_seq_ids()->Reserve(static_cast<int>(plan.finished.size()));
  for (SeqId id : plan.finished) {
    request.add_finished_seq_ids(id.value());
    sent_tables_.erase(id);
  }
  request.mutable_new_sequences()->Reserve(static_cast<int>(plan.new_sequences.size()));
  const tandem::v1::NewSequence* full = nullptr;  // the last one sent with its prompt
  for (const worker::NewSequence& ns : plan.new_sequences) {
    tandem::v1::NewSequence* out = request.add_new_sequences();
    out->set_seq_id(ns.id.value());
    out->mutable_output_tokens()->Add(ns.output_tokens.begin(), ns.output_tokens.end());
    SamplingParamsToProto(ns.params, out->mutable_sampling());
    // Stop strings are matched by the coordinator (StopChecker over the
    // text); the worker never reads them, so they stay off the wire.
    out->mutable_sampling()->clear_stop();
    if (full != nullptr && SharesPrompt(*full, ns, out->sampling())) {
      // A request's sequences follow one another: its prompt goes once.
      out->clear_sampling();
      out->set_same_prompt_as(full->seq_id());
    } else {
      out->mutable_prompt_tokens()->Add(ns.prompt_tokens.begin(), ns.prompt_tokens.end());
      full = out;
    }
    out->set_seed(ns.seed);
    out->set_stream(ns.stream);
    out->set_beam_candidates(ns.params.beam_candidates);
    out->set_beam_sample(ns.params.beam_sample);
    sent_tables_[ns.id].clear();
  }
  request.mutable_copies()->Reserve(static_cast<int>(plan.copies.size()));
  for (const kv::BlockCopy& c : plan.copies) {
    tandem::v1::BlockCopy* out = request.add_copies();
    out->set_src_block_id(c.src.value());
    out->set_dst_block_id(c.dst.value());
  }
  request.mutable_sequences()->Reserve(static_cast<int>(plan.sequences.size()));
  for (const worker::SequenceStep& s : plan.sequences) {
    tandem::v1::SequenceStep* out = request.add_sequences();
    out->set_seq_id(s.id.value());
    out->mutable_tokens()->Add(s.tokens.begin(), s.tokens.end());
    out->set_start_pos(s.start_pos);
    std::vector<BlockId>& sent = sent_tables_[s.id];
    size_t common = static_cast<size_t>(
        std::mismatch(sent.begin(), sent.end(), s.block_table.begin(), s.block_table.end())
            .first -
        sent.begin());
    if (common < sent.size()) out->set_truncate_blocks_to(static_cast<int32_t>(common));
    for (size_t i = common; i < s.block_table.size(); ++i) {
      out->add_new_block_ids(s.block_table[i].value());
    }
    out->set_sample(s.sample);
    // Speculative verification: the number of draft tokens at the end of
    // `tokens` and the draft's q at each (nothing on the wire for g = 0).
    out->set_num_draft_tokens(s.num_draft_tokens);
    out->mutable_draft_probs()->Reserve(static_cast<int>(s.draft_probs.size()));
    for (const sampling::DraftProbs& q : s.draft_probs) DraftProbsToProto(q, out->add_draft_probs());
    sent.assign(s.block_table.begin(), s.block_table.end());
  }
  return request;
}

}  // namespace tandem::protocol
