// The pieces every gRPC client command of tandem-coordinator shares (`tandem
// generate`, `tandem chat`, `tandem bench`): the Inference stub for an
// address, the proto of a parsed JSONL request, one streamed call assembled
// into completions, per-call deadlines and readable gRPC status text.
#ifndef TANDEM_CLIENT_INFERENCE_CLIENT_H_
#define TANDEM_CLIENT_INFERENCE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/json_request.h"
#include "coordinator/scheduler/request.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/inference.grpc.pb.h"

namespace tandem::client {

// An insecure channel to `addr` (HOST:PORT). Connects lazily: the first call
// fails with UNAVAILABLE when nothing listens there.
std::shared_ptr<grpc::Channel> NewInferenceChannel(const std::string& addr);

// A stub over NewInferenceChannel(addr).
std::unique_ptr<tandem::v1::Inference::Stub> NewInferenceStub(const std::string& addr);

// The GenerateRequest for `request` (sampling decoding; chat prompts get the
// generation prompt).
tandem::v1::GenerateRequest GenerateRequestProto(const JsonRequest& request);

// What one GenerateStream call produced.
struct StreamedGeneration {
  grpc::Status status;  // the call's; not OK when the stream broke off
  std::vector<coordinator::Completion> completions;  // by index, n of them
  int64_t cached_prompt_tokens = 0;
  std::vector<coordinator::PositionLogprobs> prompt_logprobs;  // when asked for
  std::string error;  // the last message's error field (a completion failed)
};

// Runs `request` (asking for `num_completions` >= 1) to the end of its
// stream. `on_text` (may be empty) sees index 0's text as it arrives.
StreamedGeneration StreamGenerate(tandem::v1::Inference::Stub& stub,
                                  const tandem::v1::GenerateRequest& request,
                                  int32_t num_completions, int32_t timeout_s,
                                  const std::function<void(const std::string&)>& on_text);

// Sets a deadline `timeout_s` seconds from now; 0 means none.
void SetDeadline(grpc::ClientContext& context, int32_t timeout_s);

// "UNAVAILABLE: <message>".
std::string DescribeGrpcStatus(const grpc::Status& status);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INFERENCE_CLIENT_H_
