// tandem.v1.SamplingParams and tandem.v1.DraftProbs <-> their native
// forms, shared by every message that carries them (public requests, step
// requests, draft proposals).
#ifndef TANDEM_PROTOCOL_SAMPLING_CODEC_H_
#define TANDEM_PROTOCOL_SAMPLING_CODEC_H_

#include "engine/sampling/sampling_params.h"
#include "engine/sampling/speculative_verifier.h"
#include "tandem/v1/common.pb.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::protocol {

// Writes every field of `params` into `proto` (optional fields explicitly set,
// `seed` only when present), so the receiver never depends on defaults.
void SamplingParamsToProto(const sampling::SamplingParams& params,
                           tandem::v1::SamplingParams* proto);

// Reads `proto`; unset optional fields take the engine defaults
// (sampling::SamplingParams{}). Does not validate: callers run
// ValidateSamplingParams with their vocabulary size.
sampling::SamplingParams SamplingParamsFromProto(const tandem::v1::SamplingParams& proto);

// q for one draft token, in a tandem.v1.DraftProbs (step requests) or a
// tandem.v1.DraftToken (draft proposals; its token is set apart): both carry
// prob, support_token_ids and support_probs. Not validated
// (sampling::ValidateDraftProbs).
// `Native` is sampling::DraftProbs or draft::DraftToken (the same fields).
template <typename Native, typename Proto>
void DraftProbsToProto(const Native& probs, Proto* proto) {
  proto->set_prob(probs.prob);
  proto->mutable_support_token_ids()->Add(probs.support_tokens.begin(), probs.support_tokens.end());
  proto->mutable_support_probs()->Add(probs.support_probs.begin(), probs.support_probs.end());
}
template <typename Proto>
sampling::DraftProbs DraftProbsFromProto(const Proto& proto) {
  sampling::DraftProbs d;
  d.prob = proto.prob();
  d.support_tokens.assign(proto.support_token_ids().begin(), proto.support_token_ids().end());
  d.support_probs.assign(proto.support_probs().begin(), proto.support_probs().end());
  return d;
}

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_SAMPLING_CODEC_H_
