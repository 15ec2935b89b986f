#include "coordinator/service/inference_service.h"

#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/grpc/grpc_api_key.h"
#include "common/grpc/grpc_status.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/service/generate_stream_reactor.h"
#include "coordinator/service/generate_unary_reactor.h"
#include "engine/sampling/sampling_params.h"
#include "protocol/generate_request_codec.h"
#include "protocol/generate_response_codec.h"

namespace tandem::coordinator {
namespace {

namespace pb = tandem::v1;

}  // namespace

absl::Status InferenceService::Authenticate(const grpc::CallbackServerContext& context) const {
  return CheckCallApiKey(api_key_, context);
}

absl::StatusOr<std::vector<int32_t>> InferenceService::PromptTokens(
    const pb::GenerateRequest& request) const {
  switch (request.prompt_case()) {
    case pb::GenerateRequest::kText:
      return admission_->EncodeText(request.text());
    case pb::GenerateRequest::kTokenIds:
      return std::vector<int32_t>(request.token_ids().ids().begin(),
                                  request.token_ids().ids().end());
    case pb::GenerateRequest::kChat: {
      std::vector<tokenizer::ChatMessage> messages;
      for (const pb::ChatMessage& m : request.chat().messages()) {
        messages.push_back({m.role(), m.content()});
      }
      return admission_->EncodeChat(messages, request.chat().add_generation_prompt());
    }
    case pb::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "prompt is not set: exactly one of text, token_ids or chat is required");
}

absl::StatusOr<GenerateRequest> InferenceService::Parse(const pb::GenerateRequest& request,
                                                        RequestId id) const {
  ASSIGN_OR_RETURN(GenerateRequest native, protocol::GenerateRequestFromProto(request));
  ASSIGN_OR_RETURN(native.prompt_tokens, PromptTokens(request));
  native.id = id;
  return native;
}

protocol::OutputFormat InferenceService::FormatOf(const pb::GenerateRequest& request, RequestId id) {
  protocol::OutputFormat format = protocol::OutputFormatOf(request);
  if (format.request_id.empty()) format.request_id = absl::StrCat("tandem-", id.value());
  return format;
}

absl::StatusOr<AdmittedRequest> InferenceService::Admit(const pb::GenerateRequest& request,
                                                        RequestId id,
                                                        const protocol::OutputFormat& format,
                                                        RequestObserver* reactor) const {
  if (!admission_->admitting()) {
    return absl::UnavailableError("the coordinator is shutting down and admits no new requests");
  }
  ASSIGN_OR_RETURN(GenerateRequest native, Parse(request, id));
  ASSIGN_OR_RETURN(AdmittedRequest admitted, admission_->Admit(std::move(native), reactor));
  TANDEM_LOG(kVerbose, "request %d is request_id %s", id.value(), format.request_id);
  return admitted;
}

grpc::ServerWriteReactor<pb::GenerateStreamResponse>* InferenceService::GenerateStream(
    grpc::CallbackServerContext* context, const pb::GenerateRequest* request) {
  const RequestId id = admission_->NextId();
  const protocol::OutputFormat format = FormatOf(*request, id);
  auto* reactor = new GenerateStreamReactor(context, format, admission_);
  absl::Status auth = Authenticate(*context);
  reactor->Start(auth.ok() ? Admit(*request, id, format, reactor) : auth);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Generate(grpc::CallbackServerContext* context,
                                                     const pb::GenerateRequest* request,
                                                     pb::GenerateResponse* response) {
  const RequestId id = admission_->NextId();
  const protocol::OutputFormat format = FormatOf(*request, id);
  auto* reactor = new GenerateUnaryReactor(context, format, response, admission_);
  absl::Status auth = Authenticate(*context);
  reactor->Start(auth.ok() ? Admit(*request, id, format, reactor) : auth);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const pb::TokenizeRequest* request,
                                                     pb::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status auth = Authenticate(*context);
  reactor->Finish(auth.ok() ? TokenizeNow(*request, response) : ToGrpcStatus(auth));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Detokenize(grpc::CallbackServerContext* context,
                                                       const pb::DetokenizeRequest* request,
                                                       pb::DetokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status auth = Authenticate(*context);
  reactor->Finish(auth.ok() ? DetokenizeNow(*request, response) : ToGrpcStatus(auth));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ModelInfo(grpc::CallbackServerContext* context,
                                                      const pb::ModelInfoRequest*,
                                                      pb::ModelInfoResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status auth = Authenticate(*context);
  if (auth.ok()) ModelInfoNow(response);
  reactor->Finish(ToGrpcStatus(auth));
  return reactor;
}

grpc::Status InferenceService::TokenizeNow(const pb::TokenizeRequest& request,
                                           pb::TokenizeResponse* response) const {
  pb::GenerateRequest as_generate;
  switch (request.input_case()) {
    case pb::TokenizeRequest::kText: as_generate.set_text(request.text()); break;
    case pb::TokenizeRequest::kChat: *as_generate.mutable_chat() = request.chat(); break;
    case pb::TokenizeRequest::INPUT_NOT_SET:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "input is not set: exactly one of text or chat is required");
  }
  absl::StatusOr<std::vector<int32_t>> ids = PromptTokens(as_generate);
  if (!ids.ok()) return ToGrpcStatus(ids.status());
  response->mutable_token_ids()->Add(ids->begin(), ids->end());
  return grpc::Status::OK;
}

grpc::Status InferenceService::DetokenizeNow(const pb::DetokenizeRequest& request,
                                             pb::DetokenizeResponse* response) const {
  absl::StatusOr<std::string> text = admission_->Decode(
      std::span<const int32_t>(request.token_ids().data(), request.token_ids().size()),
      request.skip_special_tokens());
  if (!text.ok()) return ToGrpcStatus(text.status());
  response->set_text(*std::move(text));
  return grpc::Status::OK;
}

void InferenceService::ModelInfoNow(pb::ModelInfoResponse* response) const {
  const WorkerGroupInfo& info = admission_->info();
  const tokenizer::Tokenizer& tokenizer = admission_->tokenizer();
  response->set_model_name(info.model_name);
  response->set_vocab_size(info.vocab_size);
  response->set_context_length(info.context_length);
  for (int32_t id : tokenizer.EndOfGenerationIds()) response->add_eos_token_ids(id);
  response->set_has_chat_template(!tokenizer.vocab().chat_template.empty());
  response->add_decoding_modes(pb::DECODING_MODE_SAMPLING);
  response->add_decoding_modes(pb::DECODING_MODE_BEAM_SEARCH);
  response->add_decoding_modes(pb::DECODING_MODE_SPECULATIVE);
  for (const WorkerGroupStatusSnapshot& g : admission_->pool().Statuses()) {
    pb::WorkerGroupStatus* out = response->add_worker_groups();
    out->set_address(g.name);
    out->set_healthy(g.healthy);
    out->set_draining(g.draining);
    out->set_load(g.load);
    out->set_num_steps(g.stats.scheduler.num_steps_ok);
    out->set_step_ms(g.stats.scheduler.step_ms);
    out->set_worker_step_ms(g.stats.scheduler.worker_step_ms);
    out->set_num_generated_tokens(g.stats.scheduler.num_generated_tokens);
    out->set_num_prompt_tokens_computed(g.stats.scheduler.num_prompt_tokens_computed);
    out->set_num_preemptions(g.stats.scheduler.num_preemptions);
    out->set_num_blocks_used(g.stats.kv.num_blocks_used);
    out->set_num_blocks_total(g.stats.kv.num_blocks_total);
    out->set_num_speculative_rounds(g.stats.scheduler.num_speculative_rounds);
    out->set_num_draft_tokens(g.stats.scheduler.num_draft_tokens);
    out->set_num_accepted_tokens(g.stats.scheduler.num_accepted_tokens);
    out->set_num_migrations(g.stats.num_migrations);
    out->set_num_migration_failures(g.stats.num_migration_failures);
  }
  if (admission_->drafts() != nullptr) {
    for (const DraftWorkerStatusSnapshot& d : admission_->drafts()->Statuses()) {
      pb::DraftWorkerStatus* out = response->add_draft_workers();
      out->set_address(d.address);
      out->set_healthy(d.healthy);
      out->set_model_name(d.model_name);
    }
  }
}

}  // namespace tandem::coordinator
