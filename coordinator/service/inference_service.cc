#include "coordinator/service/inference_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/service/generate_stream_reactor.h"
#include "coordinator/service/generate_unary_reactor.h"
#include "protocol/generate_response_codec.h"
#include "protocol/generate_request_codec.h"
#include "draft/api/speculative_spec.h"
#include "engine/sampling/sampling_params.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/incremental_detokenizer.h"

namespace tandem::coordinator {
namespace {

namespace pb = tandem::v1;

}  // namespace

InferenceService::InferenceService(const tokenizer::Tokenizer* tokenizer,
                                   const WorkerGroupInfo& info)
    : tokenizer_(tokenizer), info_(info) {}

absl::StatusOr<std::vector<int32_t>> InferenceService::PromptTokens(
    const pb::GenerateRequest& request) const {
  switch (request.prompt_case()) {
    case pb::GenerateRequest::kText:
      return tokenizer_->Encode(request.text(), /*add_special=*/true, /*parse_special=*/true);
    case pb::GenerateRequest::kTokenIds:
      return std::vector<int32_t>(request.token_ids().ids().begin(),
                                  request.token_ids().ids().end());
    case pb::GenerateRequest::kChat: {
      if (request.chat().messages_size() == 0) {
        return absl::InvalidArgumentError("chat has 0 messages: at least 1 is required");
      }
      std::vector<tokenizer::ChatMessage> messages;
      for (const pb::ChatMessage& m : request.chat().messages()) {
        messages.push_back({m.role(), m.content()});
      }
      absl::StatusOr<std::string> text = tokenizer::ApplyChatTemplate(
          messages, request.chat().add_generation_prompt(), tokenizer_->vocab().chat_template);
      if (!text.ok()) return text.status();
      return tokenizer_->Encode(*text, /*add_special=*/true, /*parse_special=*/true);
    }
    case pb::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "prompt is not set: exactly one of text, token_ids or chat is required");
}

void InferenceService::OnDelta(const CompletionDelta& delta) { registry_.OnDelta(delta); }

void InferenceService::OnFinished(const RequestOutput& output) { registry_.OnFinished(output); }

absl::Status InferenceService::CheckRequestedDraft(const std::string& requested) const {
  if (requested.empty()) return absl::OkStatus();
  if (absl::Status s = draft::ValidateRequestedDraft(requested); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("speculative.", s.message()));
  }
  // n-gram drafting runs in the coordinator for any request.
  std::vector<std::string> kinds = {"ngram"};
  if (!local_draft_kind_.empty()) kinds.push_back(local_draft_kind_);
  if (drafts_ != nullptr) {
    for (const DraftWorkerStatusSnapshot& d : drafts_->Statuses()) {
      if (d.healthy) kinds.push_back(draft::DraftKindOfName(d.model_name));
    }
  }
  for (const std::string& kind : kinds) {
    if (draft::DraftKindMatches(requested, kind)) return absl::OkStatus();
  }
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  return absl::InvalidArgumentError(absl::StrFormat(
      "speculative.draft '%s': no draft of that kind runs here (available: %s)", requested,
      absl::StrJoin(kinds, ", ")));
}

absl::StatusOr<GenerateRequest> InferenceService::Parse(const pb::GenerateRequest& request,
                                                        RequestId id) {
  ASSIGN_OR_RETURN(GenerateRequest native, protocol::GenerateRequestFromProto(request));
  RETURN_IF_ERROR(CheckRequestedDraft(native.draft));
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
                                                        RequestObserver* observer) {
  if (!admitting_.load()) {
    return absl::UnavailableError("the coordinator is shutting down and admits no new requests");
  }
  ASSIGN_OR_RETURN(GenerateRequest native, Parse(request, id));
  AdmittedRequest admitted;
  admitted.id = native.id;
  ASSIGN_OR_RETURN(admitted.group, pool_->Route(native.prompt_tokens));
  // Registered first: the scheduler may report results before Submit returns.
  registry_.Add(admitted.id, observer);
  if (absl::Status s = admitted.group->loop->Submit(std::move(native)); !s.ok()) {
    registry_.Remove(admitted.id);
    return s;
  }
  TANDEM_LOG(kVerbose, "request %d (request_id %s) submitted to group %s", admitted.id.value(),
             format.request_id, admitted.group->name);
  return admitted;
}

grpc::ServerWriteReactor<pb::GenerateStreamResponse>* InferenceService::GenerateStream(
    grpc::CallbackServerContext* context, const pb::GenerateRequest* request) {
  const RequestId id(next_request_id_.fetch_add(1));
  const protocol::OutputFormat format = FormatOf(*request, id);
  auto* reactor = new GenerateStreamReactor(context, format, &registry_);
  reactor->Start(Admit(*request, id, format, reactor));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Generate(grpc::CallbackServerContext* context,
                                                     const pb::GenerateRequest* request,
                                                     pb::GenerateResponse* response) {
  const RequestId id(next_request_id_.fetch_add(1));
  const protocol::OutputFormat format = FormatOf(*request, id);
  auto* reactor = new GenerateUnaryReactor(context, format, response, &registry_);
  reactor->Start(Admit(*request, id, format, reactor));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const pb::TokenizeRequest* request,
                                                     pb::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(TokenizeNow(*request, response));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Detokenize(grpc::CallbackServerContext* context,
                                                       const pb::DetokenizeRequest* request,
                                                       pb::DetokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(DetokenizeNow(*request, response));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ModelInfo(grpc::CallbackServerContext* context,
                                                      const pb::ModelInfoRequest*,
                                                      pb::ModelInfoResponse* response) {
  ModelInfoNow(response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
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
  for (int32_t id : request.token_ids()) {
    if (id < 0 || id >= tokenizer_->vocab_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrFormat("token id %d is out of range: the vocabulary has %d "
                                          "tokens",
                                          id, tokenizer_->vocab_size()));
    }
  }
  // The incremental detokenizer replaces invalid UTF-8 with U+FFFD, which a
  // proto string field requires.
  tokenizer::IncrementalDetokenizer detok(*tokenizer_, request.skip_special_tokens());
  std::string text;
  for (int32_t id : request.token_ids()) text += detok.Append(id);
  text += detok.Flush();
  response->set_text(std::move(text));
  return grpc::Status::OK;
}

void InferenceService::ModelInfoNow(pb::ModelInfoResponse* response) const {
  response->set_model_name(info_.model_name);
  response->set_vocab_size(info_.vocab_size);
  response->set_context_length(info_.context_length);
  for (int32_t id : tokenizer_->EndOfGenerationIds()) response->add_eos_token_ids(id);
  response->set_has_chat_template(!tokenizer_->vocab().chat_template.empty());
  response->add_decoding_modes(pb::DECODING_MODE_SAMPLING);
  response->add_decoding_modes(pb::DECODING_MODE_BEAM_SEARCH);
  response->add_decoding_modes(pb::DECODING_MODE_SPECULATIVE);
  for (const WorkerGroupStatusSnapshot& g : pool_->Statuses()) {
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
  }
  if (drafts_ != nullptr) {
    for (const DraftWorkerStatusSnapshot& d : drafts_->Statuses()) {
      pb::DraftWorkerStatus* out = response->add_draft_workers();
      out->set_address(d.address);
      out->set_healthy(d.healthy);
      out->set_model_name(d.model_name);
    }
  }
}

}  // namespace tandem::coordinator
