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

// q for one draft token. Not validated (sampling::ValidateDraftProbs).
void DraftProbsToProto(const sampling::DraftProbs& probs, tandem::v1::DraftProbs* proto);
sampling::DraftProbs DraftProbsFromProto(const tandem::v1::DraftProbs& proto);

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_SAMPLING_CODEC_H_
