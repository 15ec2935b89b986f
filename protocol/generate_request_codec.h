// tandem.v1.GenerateRequest -> coordinator::GenerateRequest: everything but
// the prompt (the Inference service tokenizes text and chat prompts) and the
// id. Enum values the protocol does not define are rejected here; ranges are
// checked once, by coordinator::ValidateGenerateRequest.
#ifndef TANDEM_PROTOCOL_GENERATE_REQUEST_CODEC_H_
#define TANDEM_PROTOCOL_GENERATE_REQUEST_CODEC_H_

#include "absl/status/statusor.h"
#include "coordinator/api/request.h"
#include "tandem/v1/inference.pb.h"

namespace tandem::protocol {

// InvalidArgument naming an unknown decoding_mode or beam early_stopping
// value and the values the protocol defines.
absl::StatusOr<coordinator::GenerateRequest> GenerateRequestFromProto(
    const tandem::v1::GenerateRequest& proto);

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_GENERATE_REQUEST_CODEC_H_
