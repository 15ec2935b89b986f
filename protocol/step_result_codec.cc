#include "protocol/step_result_codec.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace tandem::protocol {
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

// InvalidArgument unless token is in [0, vocab_size), naming `context`, what
// the token is, the token and the limit.
absl::Status CheckToken(int32_t token, int32_t vocab_size, const std::string& context,
                        const char* what) {
  if (token >= 0 && token < vocab_size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat("%s: %s %d is out of range: must be in [0, %d)",
                                                    context, what, token, vocab_size));
}

// One PromptLogprobs entry of step `step_id`'s response, tokens checked.
absl::StatusOr<worker::PromptLogprobs> PromptLogprobsFromProto(
    const tandem::v1::PromptLogprobs& p, int64_t step_id, int32_t vocab_size) {
  const std::string context =
      absl::StrFormat("step %d prompt logprobs for sequence %d", step_id, p.seq_id());
  auto check = [&](int32_t token, const char* what) {
    return CheckToken(token, vocab_size, context, what);
  };
  if (p.first_position() < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: first_position %d must be >= 1", context, p.first_position()));
  }
  worker::PromptLogprobs out;
  out.id = SeqId(p.seq_id());
  out.first_position = p.first_position();
  out.tokens.reserve(p.tokens_size());
  for (const tandem::v1::ScoredToken& s : p.tokens()) {
    RETURN_IF_ERROR(check(s.token(), "prompt token"));
    sampling::SampleResult& scored = out.tokens.emplace_back();
    scored.token = s.token();
    scored.logprob = s.logprob();
    for (const tandem::v1::TokenLogprob& t : s.top_logprobs()) {
      RETURN_IF_ERROR(check(t.token(), "prompt top-logprob token"));
      scored.top_logprobs.push_back({t.token(), t.logprob()});
    }
  }
  return out;
}

}  // namespace

void StepResultToProto(const worker::StepResult& result, tandem::v1::StepResponse* proto) {
  proto->Clear();
  proto->set_step_id(result.step_id);
  proto->mutable_results()->Reserve(static_cast<int>(result.results.size()));
  for (const worker::SequenceResult& r : result.results) {
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
  for (const worker::PromptLogprobs& p : result.prompt_logprobs) {
    tandem::v1::PromptLogprobs* out = proto->add_prompt_logprobs();
    out->set_seq_id(p.id.value());
    out->set_first_position(p.first_position);
    for (const sampling::SampleResult& s : p.tokens) {
      tandem::v1::ScoredToken* scored = out->add_tokens();
      scored->set_token(s.token);
      scored->set_logprob(s.logprob);
      AddTopLogprobs(s.top_logprobs, scored->mutable_top_logprobs());
    }
  }
  tandem::v1::StepTimings* t = proto->mutable_timings();
  t->set_forward_ms(result.timings.forward_ms);
  t->set_sample_ms(result.timings.sample_ms);
  t->set_total_ms(result.timings.total_ms);
  t->set_num_tokens(result.timings.num_tokens);
}

absl::StatusOr<worker::StepResult> StepResultFromProto(const tandem::v1::StepResponse& proto,
                                                       int32_t vocab_size) {
  worker::StepResult result;
  result.step_id = proto.step_id();
  result.results.reserve(proto.results_size());
  for (const tandem::v1::SequenceResult& r : proto.results()) {
    const std::string context =
        absl::StrFormat("step %d result for sequence %d", proto.step_id(), r.seq_id());
    auto check = [&](int32_t token, const char* what) {
      return CheckToken(token, vocab_size, context, what);
    };
    RETURN_IF_ERROR(check(r.token(), "sampled token"));
    worker::SequenceResult& out = result.results.emplace_back();
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
  for (const tandem::v1::PromptLogprobs& p : proto.prompt_logprobs()) {
    ASSIGN_OR_RETURN(worker::PromptLogprobs scored,
                     PromptLogprobsFromProto(p, proto.step_id(), vocab_size));
    result.prompt_logprobs.push_back(std::move(scored));
  }
  result.timings.forward_ms = proto.timings().forward_ms();
  result.timings.sample_ms = proto.timings().sample_ms();
  result.timings.total_ms = proto.timings().total_ms();
  result.timings.num_tokens = proto.timings().num_tokens();
  return result;
}

}  // namespace tandem::protocol
