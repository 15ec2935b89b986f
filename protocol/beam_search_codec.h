// tandem.v1.BeamSearchOptions <-> BeamSearchParams, shared by the
// coordinator's Inference service and the client SDK. Unset proto fields
// take transformers' defaults (num_return_sequences 1, one group, length
// penalty 1.0, early_stopping false).
#ifndef TANDEM_PROTOCOL_BEAM_SEARCH_CODEC_H_
#define TANDEM_PROTOCOL_BEAM_SEARCH_CODEC_H_

#include "absl/status/statusor.h"
#include "coordinator/api/beam_search_params.h"
#include "tandem/v1/inference.pb.h"

namespace tandem::protocol {

// InvalidArgument for an early_stopping value the protocol does not define.
// Ranges are not checked here: ValidateGenerateRequest does.
absl::StatusOr<coordinator::BeamSearchParams> BeamSearchParamsFromProto(
    const tandem::v1::BeamSearchOptions& proto);
void BeamSearchParamsToProto(const coordinator::BeamSearchParams& params,
                             tandem::v1::BeamSearchOptions* proto);

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_BEAM_SEARCH_CODEC_H_
