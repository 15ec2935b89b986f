// Client (include/tandem/client.h): unary calls, streams and health over one
// gRPC channel; every call goes through RetryUnavailable.
#include "tandem/client.h"

#include <utility>

#include "client/sdk/channel_credentials.h"
#include "client/sdk/generation_codec.h"
#include "client/sdk/retry.h"
#include "client/sdk/stream_call.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/inference.grpc.pb.h"

namespace tandem {
namespace {

namespace health_pb = grpc::health::v1;

ServingStatus ServingStatusFromProto(health_pb::HealthCheckResponse::ServingStatus s) {
  switch (s) {
    case health_pb::HealthCheckResponse::SERVING: return ServingStatus::kServing;
    case health_pb::HealthCheckResponse::NOT_SERVING: return ServingStatus::kNotServing;
    case health_pb::HealthCheckResponse::SERVICE_UNKNOWN: return ServingStatus::kServiceUnknown;
    default: return ServingStatus::kUnknown;
  }
}

}  // namespace

struct Client::Channel {
  Channel(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials)
      : channel(grpc::CreateChannel(address, credentials)),
        inference(v1::Inference::NewStub(channel)),
        health(health_pb::Health::NewStub(channel)) {}

  // One unary call of `method` with retries; `response` holds the last
  // attempt's answer. Nothing is sent when the options are not `usable`.
  template <typename Stub, typename Request, typename Response>
  absl::Status Unary(grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                     Stub& stub, const Request& request, Response& response,
                     const ClientOptions& options, const absl::Status& usable) {
    if (!usable.ok()) return usable;
    const sdk::Deadline deadline = sdk::DeadlineAfter(options.timeout);
    return sdk::RetryUnavailable(options.retry, deadline, [&] {
      grpc::ClientContext context;
      if (deadline) context.set_deadline(*deadline);
      sdk::Authorize(options.api_key, context);
      response.Clear();
      return sdk::FromGrpc((stub.*method)(&context, request, &response));
    });
  }

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Inference::Stub> inference;
  std::unique_ptr<health_pb::Health::Stub> health;
};

const char* ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing: return "SERVING";
    case ServingStatus::kNotServing: return "NOT_SERVING";
    case ServingStatus::kServiceUnknown: return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown: break;
  }
  return "UNKNOWN";
}

Client::Client(const std::string& address, ClientOptions options)
    : address_(address), options_(std::move(options)) {
  options_status_ = sdk::CheckApiKey(options_.api_key);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      sdk::MakeChannelCredentials(options_);
  if (options_status_.ok()) options_status_ = credentials.status();
  // Unusable options: a plaintext channel that no call ever uses (each
  // returns options_status_ first); never a fallback to plaintext for TLS.
  channel_ = std::make_unique<Channel>(
      address, credentials.ok() ? *credentials : grpc::InsecureChannelCredentials());
}

Client::~Client() = default;

absl::StatusOr<GenerateResult> Client::Generate(const GenerateRequest& request) {
  const v1::GenerateRequest proto = sdk::GenerateRequestToProto(request);
  v1::GenerateResponse response;
  absl::Status s = channel_->Unary(&v1::Inference::Stub::Generate, *channel_->inference, proto,
                                   response, options_, options_status_);
  if (!s.ok()) return s;
  return sdk::GenerateResultFromProto(response);
}

absl::StatusOr<GenerateResult> Client::Chat(std::vector<ChatMessage> messages,
                                            GenerateRequest options) {
  options.prompt = ChatPrompt{std::move(messages), /*add_generation_prompt=*/true};
  return Generate(options);
}

absl::StatusOr<GenerationStream> Client::OpenStream(const GenerateRequest& request) {
  if (!options_status_.ok()) return options_status_;
  const v1::GenerateRequest proto = sdk::GenerateRequestToProto(request);
  const sdk::Deadline deadline = sdk::DeadlineAfter(options_.timeout);
  std::unique_ptr<GenerationStream::Call> call;
  absl::Status s = sdk::RetryUnavailable(options_.retry, deadline, [&] {
    call = std::make_unique<GenerationStream::Call>(*channel_->inference, proto, deadline,
                                                    options_.api_key);
    return call->ahead ? absl::OkStatus() : call->status;
  });
  if (!s.ok()) return s;
  return GenerationStream(std::move(call));
}

absl::StatusOr<GenerateResult> Client::Stream(
    const GenerateRequest& request, const std::function<void(const StreamEvent&)>& on_event) {
  absl::StatusOr<GenerationStream> stream = OpenStream(request);
  if (!stream.ok()) return stream.status();
  ResultAssembler assembler;
  for (const StreamEvent& event : *stream) {
    assembler.Add(event);
    if (on_event) on_event(event);
  }
  if (absl::Status s = stream->status(); !s.ok()) return s;
  return assembler.Take();
}

absl::StatusOr<std::vector<int32_t>> Client::Tokenize(std::string_view text) {
  v1::TokenizeRequest request;
  request.set_text(std::string(text));
  v1::TokenizeResponse response;
  absl::Status s = channel_->Unary(&v1::Inference::Stub::Tokenize, *channel_->inference, request,
                                   response, options_, options_status_);
  if (!s.ok()) return s;
  return std::vector<int32_t>(response.token_ids().begin(), response.token_ids().end());
}

absl::StatusOr<std::vector<int32_t>> Client::TokenizeChat(const ChatPrompt& chat) {
  v1::TokenizeRequest request;
  *request.mutable_chat() = sdk::ChatPromptToProto(chat);
  v1::TokenizeResponse response;
  absl::Status s = channel_->Unary(&v1::Inference::Stub::Tokenize, *channel_->inference, request,
                                   response, options_, options_status_);
  if (!s.ok()) return s;
  return std::vector<int32_t>(response.token_ids().begin(), response.token_ids().end());
}

absl::StatusOr<std::string> Client::Detokenize(const std::vector<int32_t>& token_ids,
                                               bool skip_special_tokens) {
  v1::DetokenizeRequest request;
  request.mutable_token_ids()->Add(token_ids.begin(), token_ids.end());
  request.set_skip_special_tokens(skip_special_tokens);
  v1::DetokenizeResponse response;
  absl::Status s = channel_->Unary(&v1::Inference::Stub::Detokenize, *channel_->inference,
                                   request, response, options_, options_status_);
  if (!s.ok()) return s;
  return response.text();
}

absl::StatusOr<ModelInfo> Client::GetModelInfo() {
  v1::ModelInfoResponse response;
  absl::Status s = channel_->Unary(&v1::Inference::Stub::ModelInfo, *channel_->inference,
                                   v1::ModelInfoRequest(), response, options_, options_status_);
  if (!s.ok()) return s;
  return sdk::ModelInfoFromProto(response);
}

absl::StatusOr<ServingStatus> Client::Health(const std::string& service) {
  health_pb::HealthCheckRequest request;
  request.set_service(service);
  health_pb::HealthCheckResponse response;
  absl::Status s = channel_->Unary(&health_pb::Health::Stub::Check, *channel_->health, request,
                                   response, options_, options_status_);
  if (!s.ok()) return s;
  return ServingStatusFromProto(response.status());
}

bool Client::IsConnected() const {
  return channel_->channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
}

}  // namespace tandem
