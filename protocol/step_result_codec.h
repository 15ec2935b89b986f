// tandem.v1.StepResponse <-> worker::StepResult: what a worker group's step
// returns (sampled tokens, logprobs, verification results, beam candidates,
// timings).
#ifndef TANDEM_PROTOCOL_STEP_RESULT_CODEC_H_
#define TANDEM_PROTOCOL_STEP_RESULT_CODEC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "tandem/v1/worker.pb.h"
#include "worker/api/step_plan.h"

namespace tandem::protocol {

// Writes `result` into `proto` (cleared first).
void StepResultToProto(const worker::StepResult& result, tandem::v1::StepResponse* proto);

// Reads a StepResponse. InvalidArgument when a sampled, accepted-draft, beam
// candidate or top-logprob token is outside [0, vocab_size), naming the
// sequence, the token and the limit.
absl::StatusOr<worker::StepResult> StepResultFromProto(const tandem::v1::StepResponse& proto,
                                                       int32_t vocab_size);

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_STEP_RESULT_CODEC_H_
