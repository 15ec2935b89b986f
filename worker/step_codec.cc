#include "worker/step_codec.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tandem::worker {
namespace {

void AddTopLogprobs(const std::vector<sampling::TokenLogprob>& top,
                    google::protobuf::RepeatedPtrField<tandem::v1::TokenLogprob>* out) {
  out->Reserve(static_cast<int>(top.size()));
  for (const sampling::TokenLogprob& t : top) {
    tandem::v1::TokenLogprob* p = out->Add();
    p->set_token(t.token);
    p->set_logprob(t.logprob);
  }
}

}  // namespace

void SamplingParamsToProto(const sampling::SamplingParams& params,
                           tandem::v1::SamplingParams* proto) {
  proto->Clear();
  proto->set_temperature(params.temperature);
  proto->set_top_k(params.top_k);
  proto->set_top_p(params.top_p);
  proto->set_min_p(params.min_p);
  proto->set_repetition_penalty(params.repetition_penalty);
  proto->set_presence_penalty(params.presence_penalty);
  proto->set_frequency_penalty(params.frequency_penalty);
  if (params.seed.has_value()) proto->set_seed(*params.seed);
  proto->set_max_tokens(params.max_tokens);
  proto->set_min_tokens(params.min_tokens);
  proto->mutable_stop_token_ids()->Add(params.stop_token_ids.begin(),
                                       params.stop_token_ids.end());
  for (const std::string& s : params.stop) proto->add_stop(s);
  proto->set_ignore_eos(params.ignore_eos);
  proto->set_logprobs(params.logprobs);
  proto->set_n(params.n);
}

sampling::SamplingParams SamplingParamsFromProto(const tandem::v1::SamplingParams& proto) {
  sampling::SamplingParams p;
  if (proto.has_temperature()) p.temperature = proto.temperature();
  if (proto.has_top_k()) p.top_k = proto.top_k();
  if (proto.has_top_p()) p.top_p = proto.top_p();
  if (proto.has_min_p()) p.min_p = proto.min_p();
  if (proto.has_repetition_penalty()) p.repetition_penalty = proto.repetition_penalty();
  if (proto.has_presence_penalty()) p.presence_penalty = proto.presence_penalty();
  if (proto.has_frequency_penalty()) p.frequency_penalty = proto.frequency_penalty();
  if (proto.has_seed()) p.seed = proto.seed();
  if (proto.has_max_tokens()) p.max_tokens = proto.max_tokens();
  if (proto.has_min_tokens()) p.min_tokens = proto.min_tokens();
  p.stop_token_ids.assign(proto.stop_token_ids().begin(), proto.stop_token_ids().end());
  p.stop.assign(proto.stop().begin(), proto.stop().end());
  if (proto.has_ignore_eos()) p.ignore_eos = proto.ignore_eos();
  if (proto.has_logprobs()) p.logprobs = proto.logprobs();
  if (proto.has_n()) p.n = proto.n();
  return p;
}

void StepResultToProto(const StepResult& result, tandem::v1::StepResponse* proto) {
  proto->Clear();
  proto->set_step_id(result.step_id);
  proto->mutable_results()->Reserve(static_cast<int>(result.results.size()));
  for (const SequenceResult& r : result.results) {
    tandem::v1::SequenceResult* out = proto->add_results();
    out->set_seq_id(r.id.value());
    out->set_token(r.sample.token);
    out->set_logprob(r.sample.logprob);
    AddTopLogprobs(r.sample.top_logprobs, out->mutable_top_logprobs());
    for (const sampling::SampleResult& a : r.accepted_drafts) {
      tandem::v1::AcceptedDraft* accepted = out->add_accepted_drafts();
      accepted->set_token(a.token);
      accepted->set_logprob(a.logprob);
      AddTopLogprobs(a.top_logprobs, accepted->mutable_top_logprobs());
    }
    for (const sampling::BeamToken& b : r.sample.beam_candidates) {
      tandem::v1::BeamCandidate* c = out->add_beam_candidates();
      c->set_token(b.token);
      c->set_score(b.score);
      c->set_key(b.key);
    }
    for (const std::vector<sampling::BeamToken>& row : r.draft_beam_candidates) {
      tandem::v1::BeamCandidates* wire = out->add_draft_beam_candidates();
      for (const sampling::BeamToken& b : row) {
        tandem::v1::BeamCandidate* c = wire->add_candidates();
        c->set_token(b.token);
        c->set_score(b.score);
        c->set_key(b.key);
      }
    }
  }
  tandem::v1::StepTimings* t = proto->mutable_timings();
  t->set_forward_ms(result.timings.forward_ms);
  t->set_sample_ms(result.timings.sample_ms);
  t->set_total_ms(result.timings.total_ms);
  t->set_num_tokens(result.timings.num_tokens);
}

absl::StatusOr<StepResult> StepResultFromProto(const tandem::v1::StepResponse& proto,
                                               int32_t vocab_size) {
  StepResult result;
  result.step_id = proto.step_id();
  result.results.reserve(proto.results_size());
  for (const tandem::v1::SequenceResult& r : proto.results()) {
    auto check = [&](int32_t token, const char* what) -> absl::Status {
      if (token < 0 || token >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "step %d result for sequence %d: %s %d is out of range: must be in [0, %d)",
            proto.step_id(), r.seq_id(), what, token, vocab_size));
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(check(r.token(), "sampled token"));
    SequenceResult& out = result.results.emplace_back();
    out.id = SeqId(r.seq_id());
    out.sample.token = r.token();
    out.sample.logprob = r.logprob();
    out.sample.top_logprobs.reserve(r.top_logprobs_size());
    for (const tandem::v1::TokenLogprob& t : r.top_logprobs()) {
      RETURN_IF_ERROR(check(t.token(), "top-logprob token"));
      out.sample.top_logprobs.push_back({t.token(), t.logprob()});
    }
    out.accepted_drafts.reserve(r.accepted_drafts_size());
    for (const tandem::v1::AcceptedDraft& a : r.accepted_drafts()) {
      RETURN_IF_ERROR(check(a.token(), "accepted draft token"));
      sampling::SampleResult& accepted = out.accepted_drafts.emplace_back();
      accepted.token = a.token();
      accepted.logprob = a.logprob();
      accepted.top_logprobs.reserve(a.top_logprobs_size());
      for (const tandem::v1::TokenLogprob& t : a.top_logprobs()) {
        RETURN_IF_ERROR(check(t.token(), "accepted draft top-logprob token"));
        accepted.top_logprobs.push_back({t.token(), t.logprob()});
      }
    }
    out.sample.beam_candidates.reserve(r.beam_candidates_size());
    for (const tandem::v1::BeamCandidate& c : r.beam_candidates()) {
      RETURN_IF_ERROR(check(c.token(), "beam candidate token"));
      out.sample.beam_candidates.push_back({c.token(), c.score(), c.key()});
    }
    for (const tandem::v1::BeamCandidates& wire : r.draft_beam_candidates()) {
      std::vector<sampling::BeamToken>& row = out.draft_beam_candidates.emplace_back();
      for (const tandem::v1::BeamCandidate& c : wire.candidates()) {
        RETURN_IF_ERROR(check(c.token(), "draft beam candidate token"));
        row.push_back({c.token(), c.score(), c.key()});
      }
    }
  }
  result.timings.forward_ms = proto.timings().forward_ms();
  result.timings.sample_ms = proto.timings().sample_ms();
  result.timings.total_ms = proto.timings().total_ms();
  result.timings.num_tokens = proto.timings().num_tokens();
  return result;
}

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

absl::StatusOr<StepPlan> StepDecoder::Decode(const tandem::v1::StepRequest& request) {
  StepPlan plan;
  plan.step_id = request.step_id();

  // Validation pass: nothing in tables_ changes until the whole request is
  // known to be consistent.
  absl::flat_hash_set<SeqId> finished;
  plan.finished.reserve(request.finished_seq_ids_size());
  for (int64_t id : request.finished_seq_ids()) {
    plan.finished.push_back(SeqId(id));
    finished.insert(SeqId(id));
  }
  auto held = [&](SeqId id) { return tables_.contains(id) && !finished.contains(id); };

  absl::flat_hash_set<SeqId> added;
  plan.new_sequences.reserve(request.new_sequences_size());
  for (const tandem::v1::NewSequence& ns : request.new_sequences()) {
    SeqId id(ns.seq_id());
    if (held(id) || added.contains(id)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: new sequence %d is already live on this worker", request.step_id(),
          ns.seq_id()));
    }
    added.insert(id);
    RETURN_IF_ERROR(CheckTokens(ns.prompt_tokens(), "prompt_tokens", ns.seq_id()));
    RETURN_IF_ERROR(CheckTokens(ns.output_tokens(), "output_tokens", ns.seq_id()));
    NewSequence& out = plan.new_sequences.emplace_back();
    out.id = id;
    out.prompt_tokens.assign(ns.prompt_tokens().begin(), ns.prompt_tokens().end());
    out.output_tokens.assign(ns.output_tokens().begin(), ns.output_tokens().end());
    out.params = SamplingParamsFromProto(ns.sampling());
    out.params.beam_candidates = ns.beam_candidates();
    out.params.beam_sample = ns.beam_sample();
    absl::Status valid = sampling::ValidateSamplingParams(out.params, config_.vocab_size);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sequence %d: %s", ns.seq_id(), valid.message()));
    }
    out.seed = ns.seed();
    out.stream = ns.stream();
  }

  plan.copies.reserve(request.copies_size());
  for (const tandem::v1::BlockCopy& c : request.copies()) {
    RETURN_IF_ERROR(CheckBlock(c.src_block_id(), "block copy source", -1));
    RETURN_IF_ERROR(CheckBlock(c.dst_block_id(), "block copy destination", -1));
    plan.copies.push_back({BlockId(c.src_block_id()), BlockId(c.dst_block_id())});
  }

  static const std::vector<BlockId> kEmpty;
  absl::flat_hash_set<SeqId> stepped;
  plan.sequences.reserve(request.sequences_size());
  for (const tandem::v1::SequenceStep& s : request.sequences()) {
    SeqId id(s.seq_id());
    const std::vector<BlockId>* base = nullptr;
    if (added.contains(id)) {
      base = &kEmpty;
    } else if (held(id)) {
      base = &tables_.find(id)->second;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: sequence %d is not live on this worker (never sent as new, or finished)",
          request.step_id(), s.seq_id()));
    }
    if (!stepped.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: sequence %d appears twice in the batch", request.step_id(), s.seq_id()));
    }
    if (s.tokens_size() == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "step %d: sequence %d computes no tokens: a step needs at least 1", request.step_id(),
          s.seq_id()));
    }
    if (s.start_pos() < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: start_pos %d is out of range: must be >= 0", s.seq_id(), s.start_pos()));
    }
    RETURN_IF_ERROR(CheckTokens(s.tokens(), "tokens", s.seq_id()));
    size_t keep = base->size();
    if (s.has_truncate_blocks_to()) {
      if (s.truncate_blocks_to() < 0 ||
          static_cast<size_t>(s.truncate_blocks_to()) > base->size()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "sequence %d: truncate_blocks_to %d is out of range: the worker's table has %d "
            "blocks",
            s.seq_id(), s.truncate_blocks_to(), base->size()));
      }
      keep = static_cast<size_t>(s.truncate_blocks_to());
    }
    for (int32_t b : s.new_block_ids()) RETURN_IF_ERROR(CheckBlock(b, "new block id", s.seq_id()));
    SequenceStep& out = plan.sequences.emplace_back();
    out.id = id;
    out.tokens.assign(s.tokens().begin(), s.tokens().end());
    out.start_pos = s.start_pos();
    out.block_table.reserve(keep + s.new_block_ids_size());
    out.block_table.assign(base->begin(), base->begin() + static_cast<ptrdiff_t>(keep));
    for (int32_t b : s.new_block_ids()) out.block_table.push_back(BlockId(b));
    out.sample = s.sample();
    out.num_draft_tokens = s.num_draft_tokens();
    out.draft_probs.reserve(s.draft_probs_size());
    for (const tandem::v1::DraftProbs& q : s.draft_probs()) {
      sampling::DraftProbs& d = out.draft_probs.emplace_back();
      d.prob = q.prob();
      d.support_tokens.assign(q.support_token_ids().begin(), q.support_token_ids().end());
      d.support_probs.assign(q.support_probs().begin(), q.support_probs().end());
    }
    RETURN_IF_ERROR(ValidateDraftFields(out, config_.vocab_size));
    int64_t end = int64_t{s.start_pos()} + s.tokens_size();
    int64_t covered = static_cast<int64_t>(out.block_table.size()) * config_.block_size;
    if (covered < end) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: block table of %d blocks covers %d positions but the step writes up "
          "to position %d (block_size %d)",
          s.seq_id(), out.block_table.size(), covered, end, config_.block_size));
    }
  }

  // Commit: the request is consistent; apply it in protocol order.
  for (SeqId id : plan.finished) tables_.erase(id);
  for (const NewSequence& ns : plan.new_sequences) tables_[ns.id].clear();
  for (const SequenceStep& s : plan.sequences) tables_[s.id] = s.block_table;
  return plan;
}

}  // namespace tandem::worker
