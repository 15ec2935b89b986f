// tandem.v1.BeamSearchOptions <-> BeamSearchParams, shared by the
// coordinator's Inference service and the client SDK. Unset proto fields
// take transformers' defaults (num_return_sequences 1, one group, length
// penalty 1.0, early_stopping false).
#ifndef TANDEM_COORDINATOR_DECODING_BEAM_SEARCH_PROTO_H_
#define TANDEM_COORDINATOR_DECODING_BEAM_SEARCH_PROTO_H_

#include "coordinator/decoding/beam_search.h"
#include "tandem/v1/inference.pb.h"

namespace tandem::coordinator {

// Not validated: call ValidateBeamSearchParams (Scheduler::Submit does).
BeamSearchParams BeamSearchParamsFromProto(const tandem::v1::BeamSearchOptions& proto);
void BeamSearchParamsToProto(const BeamSearchParams& params, tandem::v1::BeamSearchOptions* proto);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_DECODING_BEAM_SEARCH_PROTO_H_
