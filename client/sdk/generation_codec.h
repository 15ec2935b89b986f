// The SDK's public structs (include/tandem/generation.h) ↔ tandem.v1 protos.
// Internal to the SDK: the public headers never name a proto type.
#ifndef TANDEM_CLIENT_SDK_GENERATION_CODEC_H_
#define TANDEM_CLIENT_SDK_GENERATION_CODEC_H_

#include "tandem/generation.h"
#include "tandem/v1/inference.pb.h"

namespace tandem::sdk {

// The proto of `request`. Beam search wins over speculation when both are
// set; the server rejects what it does not accept, so nothing is checked here.
v1::GenerateRequest GenerateRequestToProto(const GenerateRequest& request);

v1::ChatMessages ChatPromptToProto(const ChatPrompt& chat);

StreamEvent StreamEventFromProto(const v1::GenerateStreamResponse& proto);
GenerateResult GenerateResultFromProto(const v1::GenerateResponse& proto);
ModelInfo ModelInfoFromProto(const v1::ModelInfoResponse& proto);

}  // namespace tandem::sdk

#endif  // TANDEM_CLIENT_SDK_GENERATION_CODEC_H_
