#include "client/inference_client.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "worker/step_codec.h"

namespace tandem::client {
namespace {

namespace pb = tandem::v1;

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

}  // namespace

std::unique_ptr<pb::Inference::Stub> NewInferenceStub(const std::string& addr) {
  return pb::Inference::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
}

pb::GenerateRequest GenerateRequestProto(const JsonRequest& r) {
  pb::GenerateRequest g;
  if (r.prompt) {
    g.set_text(*r.prompt);
  } else if (r.prompt_token_ids) {
    g.mutable_token_ids()->mutable_ids()->Add(r.prompt_token_ids->begin(),
                                              r.prompt_token_ids->end());
  } else {
    g.mutable_chat()->set_add_generation_prompt(true);
    for (const tokenizer::ChatMessage& m : r.messages) {
      pb::ChatMessage* out = g.mutable_chat()->add_messages();
      out->set_role(m.role);
      out->set_content(m.content);
    }
  }
  worker::SamplingParamsToProto(r.params, g.mutable_sampling());
  g.set_priority(r.priority);
  g.set_decoding_mode(pb::DECODING_MODE_SAMPLING);
  return g;
}

void SetDeadline(grpc::ClientContext& context, int32_t timeout_s) {
  if (timeout_s > 0) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  }
}

std::string DescribeGrpcStatus(const grpc::Status& s) {
  return absl::StrFormat("%s: %s", StatusCodeName(s.error_code()), s.error_message());
}

}  // namespace tandem::client
