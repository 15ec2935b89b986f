// The pieces every gRPC client command of tandem-coordinator shares (`tandem
// generate`, `tandem bench`): the Inference stub for an address, the proto of a
// parsed JSONL request, per-call deadlines and readable gRPC status text.
#ifndef TANDEM_CLIENT_INFERENCE_CLIENT_H_
#define TANDEM_CLIENT_INFERENCE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "client/json_request.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/inference.grpc.pb.h"

namespace tandem::client {

// A stub over an insecure channel to `addr` (HOST:PORT). Connects lazily: the
// first call fails with UNAVAILABLE when nothing listens there.
std::unique_ptr<tandem::v1::Inference::Stub> NewInferenceStub(const std::string& addr);

// The GenerateRequest for `request` (sampling decoding; chat prompts get the
// generation prompt).
tandem::v1::GenerateRequest GenerateRequestProto(const JsonRequest& request);

// Sets a deadline `timeout_s` seconds from now; 0 means none.
void SetDeadline(grpc::ClientContext& context, int32_t timeout_s);

// "UNAVAILABLE: <message>".
std::string DescribeGrpcStatus(const grpc::Status& status);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INFERENCE_CLIENT_H_
