#include "protocol/draft_codec.h"

#include "protocol/sampling_codec.h"

namespace tandem::protocol {

void DraftRequestToProto(const draft::DraftRequest& r, int64_t wire_id,
                         tandem::v1::ProposeSequence* s) {
  s->set_seq_id(wire_id);
  s->mutable_new_tokens()->Add(r.new_tokens.begin(), r.new_tokens.end());
  s->set_start_pos(r.start_pos);
  s->set_num_draft_tokens(r.gamma);
  if (r.params != nullptr) {
    SamplingParamsToProto(*r.params, s->mutable_sampling());
    // Stop strings are the coordinator's to match; a draft never reads them.
    s->mutable_sampling()->clear_stop();
  }
  s->set_seed(r.seed);
  s->set_stream(r.stream);
}

draft::DraftProposal DraftProposalFromProto(const tandem::v1::Proposal& proto) {
  draft::DraftProposal p;
  for (const tandem::v1::DraftToken& t : proto.tokens()) {
    p.tokens.push_back(t.token());
    p.probs.push_back(DraftProbsFromProto(t));
  }
  return p;
}

draft::ProposeInput ProposeInputFromProto(const tandem::v1::ProposeSequence& s,
                                          std::optional<sampling::SamplingParams>& params) {
  if (s.has_sampling()) params = SamplingParamsFromProto(s.sampling());
  draft::ProposeInput in;
  in.seq = SeqId(s.seq_id());
  in.new_tokens =
      std::span<const int32_t>(s.new_tokens().data(), static_cast<size_t>(s.new_tokens_size()));
  in.start_pos = s.start_pos();
  in.gamma = s.num_draft_tokens();
  in.params = params ? &*params : nullptr;
  in.seed = s.seed();
  in.stream = s.stream();
  return in;
}

void DraftTokensToProto(const std::vector<draft::DraftToken>& tokens,
                        tandem::v1::Proposal* proposal) {
  for (const draft::DraftToken& t : tokens) {
    tandem::v1::DraftToken* pt = proposal->add_tokens();
    pt->set_token(t.token);
    DraftProbsToProto(t, pt);
  }
}

}  // namespace tandem::protocol
