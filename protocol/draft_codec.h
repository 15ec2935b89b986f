// tandem.v1.Draft messages <-> native: a coordinator's draft::DraftRequest as a
// ProposeSequence and the Proposal that answers it (coordinator side), a
// ProposeSequence as the proposer's ProposeInput and its DraftTokens as a
// Proposal (draft worker side).
#ifndef TANDEM_PROTOCOL_DRAFT_CODEC_H_
#define TANDEM_PROTOCOL_DRAFT_CODEC_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "draft/api/draft_request.h"
#include "draft/api/proposer.h"
#include "engine/sampling/sampling_params.h"
#include "tandem/v1/draft.pb.h"

namespace tandem::protocol {

// `wire_id` is the sequence's id on the draft worker.
void DraftRequestToProto(const draft::DraftRequest& request, int64_t wire_id,
                         tandem::v1::ProposeSequence* proto);
// The proposal's tokens with their q (DraftProposal::ok stays true).
draft::DraftProposal DraftProposalFromProto(const tandem::v1::Proposal& proto);

// A view of `proto` (which must outlive it); its params point into
// `params`, set when the sequence carries sampling params. Not validated:
// the proposer validates its inputs (draft::ValidateProposeInputs).
draft::ProposeInput ProposeInputFromProto(const tandem::v1::ProposeSequence& proto,
                                          std::optional<sampling::SamplingParams>& params);
void DraftTokensToProto(const std::vector<draft::DraftToken>& tokens,
                        tandem::v1::Proposal* proto);

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_DRAFT_CODEC_H_
