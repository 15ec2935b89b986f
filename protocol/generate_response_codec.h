// Native request results → the tandem.v1 replies of Generate and
// GenerateStream, shaped by what the request asked for (OutputFormat).
//
// Thread-safety: plain functions.
#ifndef TANDEM_PROTOCOL_GENERATE_RESPONSE_CODEC_H_
#define TANDEM_PROTOCOL_GENERATE_RESPONSE_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/api/request.h"
#include "tandem/v1/inference.pb.h"

namespace tandem::protocol {

// What of a request shapes its replies.
struct OutputFormat {
  std::string request_id;  // the client's, echoed
  int32_t top_logprobs = 0;  // sampling.logprobs; 0: no logprobs
  bool beam_search = false;  // final stream message lists every sequence
};
OutputFormat OutputFormatOf(const tandem::v1::GenerateRequest& request);

// One GenerateStream message: `deltas` (moved from) and, on the last
// message, the request's output `done` (usage, timings, the error message,
// beam sequences); `done` is null before.
void FillStreamResponse(std::vector<coordinator::CompletionDelta>& deltas,
                        const coordinator::RequestOutput* done, const OutputFormat& format,
                        tandem::v1::GenerateStreamResponse* out);

// The Generate reply for the finished request `done`.
void FillGenerateResponse(const coordinator::RequestOutput& done, const OutputFormat& format,
                          tandem::v1::GenerateResponse* out);

}  // namespace tandem::protocol

#endif  // TANDEM_PROTOCOL_GENERATE_RESPONSE_CODEC_H_
