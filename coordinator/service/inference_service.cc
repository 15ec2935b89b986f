#include "coordinator/service/inference_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "protocol/beam_search_codec.h"
#include "draft/api/speculative_spec.h"
#include "common/logging.h"
#include "engine/sampling/sampling_params.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "protocol/beam_search_codec.h"
#include "protocol/sampling_codec.h"

namespace tandem::coordinator {
namespace {

namespace pb = tandem::v1;

pb::FinishReason ToProto(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return pb::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kStop: return pb::FINISH_REASON_STOP;
    case FinishReason::kLength: return pb::FINISH_REASON_LENGTH;
    case FinishReason::kCancelled: return pb::FINISH_REASON_CANCELLED;
    case FinishReason::kError: return pb::FINISH_REASON_ERROR;
  }
  return pb::FINISH_REASON_UNSPECIFIED;
}

void AddLogprobs(const std::vector<PositionLogprobs>& from,
                 google::protobuf::RepeatedPtrField<pb::PositionLogprobs>* to) {
  for (const PositionLogprobs& p : from) {
    pb::PositionLogprobs* out = to->Add();
    out->set_token(p.token);
    out->set_logprob(p.logprob);
    for (const sampling::TokenLogprob& t : p.top) {
      pb::TokenLogprob* alt = out->add_top_logprobs();
      alt->set_token(t.token);
      alt->set_logprob(t.logprob);
    }
  }
}

void FillCompletion(const Completion& c, int32_t index, int32_t top_k, pb::Completion* out) {
  out->set_index(index);
  out->set_text(c.text);
  out->mutable_token_ids()->Add(c.token_ids.begin(), c.token_ids.end());
  out->set_finish_reason(ToProto(c.finish_reason));
  if (top_k > 0) AddLogprobs(c.logprobs, out->mutable_logprobs());
  if (c.score.has_value()) out->set_score(*c.score);
}

void FillUsage(const RequestOutput& out, pb::Usage* usage, pb::RequestTimings* timings) {
  int64_t completion_tokens = 0;
  for (const Completion& c : out.completions) completion_tokens += c.token_ids.size();
  const int64_t prompt_tokens = static_cast<int64_t>(out.prompt_token_ids.size());
  usage->set_prompt_tokens(prompt_tokens);
  usage->set_completion_tokens(completion_tokens);
  usage->set_total_tokens(prompt_tokens + completion_tokens);
  usage->set_cached_prompt_tokens(out.prefix_hit_tokens);
  // The scheduler reports no admission time yet, so queue_ms stays 0.
  timings->set_queue_ms(out.queue_ms);
  timings->set_time_to_first_token_ms(out.time_to_first_token_ms);
  timings->set_latency_ms(out.latency_ms);
}

const char* DecodingModeName(pb::DecodingMode mode) {
  const std::string& name = pb::DecodingMode_Name(mode);
  return name.empty() ? "unknown" : name.c_str();
}

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

void InferenceService::OnDelta(const CompletionDelta& delta) {
  absl::MutexLock lock(&registry_mutex_);
  auto it = streams_.find(delta.id);
  if (it != streams_.end()) it->second->PushDelta(delta);
}

void InferenceService::OnFinished(const RequestOutput& output) {
  absl::MutexLock lock(&registry_mutex_);
  auto it = streams_.find(output.id);
  if (it != streams_.end()) it->second->PushFinished(output);
}

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

grpc::Status InferenceService::Run(grpc::ServerContext* context, const pb::GenerateRequest& request,
                                   const Emit& emit) {
  if (!admitting_.load()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the coordinator is shutting down and admits no new requests");
  }
  if (request.decoding_mode() == pb::DECODING_MODE_SPECULATIVE) {
    const pb::SpeculativeOptions& spec = request.speculative();
    if (absl::Status s = CheckRequestedDraft(spec.draft()); !s.ok()) return ToGrpcStatus(s);
    if (spec.num_speculative_tokens() < 0 || spec.num_speculative_tokens() > 64) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrFormat("speculative.num_speculative_tokens %d is out of range: "
                                          "must be in [0, 64]",
                                          spec.num_speculative_tokens()));
    }
  }
  absl::StatusOr<std::vector<int32_t>> prompt = PromptTokens(request);
  if (!prompt.ok()) return ToGrpcStatus(prompt.status());

  GenerateRequest native;
  native.id = RequestId(next_request_id_.fetch_add(1));
  native.prompt_tokens = *std::move(prompt);
  native.params = protocol::SamplingParamsFromProto(request.sampling());
  native.priority = request.priority();
  if (request.decoding_mode() == pb::DECODING_MODE_BEAM_SEARCH) {
    absl::StatusOr<BeamSearchParams> beam =
        protocol::BeamSearchParamsFromProto(request.beam_search());
    if (!beam.ok()) return ToGrpcStatus(beam.status());
    native.beam = *beam;
  }
  if (request.decoding_mode() == pb::DECODING_MODE_SPECULATIVE) {
    const pb::SpeculativeOptions& spec = request.speculative();
    if (spec.off()) {
      native.num_speculative_tokens = 0;
    } else if (spec.num_speculative_tokens() > 0) {
      native.num_speculative_tokens = spec.num_speculative_tokens();
    }
    native.draft = spec.draft();
  }
  const RequestId id = native.id;

  RequestStream stream;
  {
    absl::MutexLock lock(&registry_mutex_);
    streams_[id] = &stream;
  }
  auto unregister = [&] {
    absl::MutexLock lock(&registry_mutex_);
    streams_.erase(id);
  };
  // Held until the request is over: the group outlives it even if
  // discovery drops the group meanwhile.
  absl::StatusOr<std::shared_ptr<WorkerGroupEntry>> group = pool_->Route(native.prompt_tokens);
  if (!group.ok()) {
    unregister();
    return ToGrpcStatus(group.status());
  }
  SchedulerLoop* loop = (*group)->loop.get();
  if (absl::Status s = loop->Submit(std::move(native)); !s.ok()) {
    unregister();
    return ToGrpcStatus(s);
  }
  TANDEM_LOG(kVerbose, "request %d submitted to group %s", id.value(), (*group)->name);

  // The deadline is checked here; cancellation is polled between waits
  // because the synchronous API has no cancellation callback. A wait returns
  // at once when the scheduler produces something.
  const absl::Time deadline = context->deadline() == std::chrono::system_clock::time_point::max()
                                  ? absl::InfiniteFuture()
                                  : absl::FromChrono(context->deadline());
  constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);
  grpc::Status result = grpc::Status::OK;
  bool cancelled = false;
  while (true) {
    RequestStream::Batch batch = stream.Wait(std::min(deadline, absl::Now() + kCancelPoll));
    const RequestOutput* done = batch.finished ? &*batch.finished : nullptr;
    if (!batch.deltas.empty() || done != nullptr) {
      if (!emit(batch.deltas, done)) {
        cancelled = true;
        result = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        break;
      }
    }
    if (done != nullptr) {
      if (!done->status.ok()) result = ToGrpcStatus(done->status);
      break;
    }
    if (context->IsCancelled()) {
      cancelled = true;
      result = grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the request");
      break;
    }
    if (absl::Now() >= deadline) {
      cancelled = true;
      result = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            "the request's deadline passed before it finished");
      break;
    }
  }
  if (cancelled) {
    TANDEM_LOG(kInfo, "request %d: %s", id.value(), result.error_message());
    loop->Cancel(id);
  }
  unregister();
  return result;
}

grpc::Status InferenceService::GenerateStream(grpc::ServerContext* context,
                                              const pb::GenerateRequest* request,
                                              grpc::ServerWriter<pb::GenerateStreamResponse>* writer) {
  const std::string& client_id = request->request_id();
  const int32_t top_k = request->sampling().has_logprobs() ? request->sampling().logprobs() : 0;
  auto emit = [&](std::vector<CompletionDelta>& deltas, const RequestOutput* done) {
    pb::GenerateStreamResponse msg;
    msg.set_request_id(client_id);
    for (CompletionDelta& d : deltas) {
      pb::CompletionDelta* out = msg.add_deltas();
      out->set_index(d.index);
      out->set_text(std::move(d.text));
      out->mutable_token_ids()->Add(d.token_ids.begin(), d.token_ids.end());
      if (top_k > 0) AddLogprobs(d.logprobs, out->mutable_logprobs());
      out->set_finish_reason(ToProto(d.finish_reason));
      out->set_replace(d.replace);
    }
    if (done != nullptr) {
      FillUsage(*done, msg.mutable_usage(), msg.mutable_timings());
      msg.set_error(std::string(done->status.message()));
      if (request->decoding_mode() == pb::DECODING_MODE_BEAM_SEARCH) {
        for (size_t i = 0; i < done->completions.size(); ++i) {
          FillCompletion(done->completions[i], static_cast<int32_t>(i), top_k,
                         msg.add_sequences());
        }
      }
    } else if (msg.deltas_size() == 0) {
      return true;
    }
    return writer->Write(msg);
  };
  return Run(context, *request, emit);
}

grpc::Status InferenceService::Generate(grpc::ServerContext* context,
                                        const pb::GenerateRequest* request,
                                        pb::GenerateResponse* response) {
  const int32_t top_k = request->sampling().has_logprobs() ? request->sampling().logprobs() : 0;
  auto emit = [&](std::vector<CompletionDelta>&, const RequestOutput* done) {
    if (done == nullptr) return true;
    response->set_request_id(request->request_id());
    for (size_t i = 0; i < done->completions.size(); ++i) {
      FillCompletion(done->completions[i], static_cast<int32_t>(i), top_k,
                     response->add_completions());
    }
    FillUsage(*done, response->mutable_usage(), response->mutable_timings());
    response->set_error(std::string(done->status.message()));
    return true;
  };
  return Run(context, *request, emit);
}

grpc::Status InferenceService::Tokenize(grpc::ServerContext*, const pb::TokenizeRequest* request,
                                        pb::TokenizeResponse* response) {
  pb::GenerateRequest as_generate;
  switch (request->input_case()) {
    case pb::TokenizeRequest::kText: as_generate.set_text(request->text()); break;
    case pb::TokenizeRequest::kChat: *as_generate.mutable_chat() = request->chat(); break;
    case pb::TokenizeRequest::INPUT_NOT_SET:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "input is not set: exactly one of text or chat is required");
  }
  absl::StatusOr<std::vector<int32_t>> ids = PromptTokens(as_generate);
  if (!ids.ok()) return ToGrpcStatus(ids.status());
  response->mutable_token_ids()->Add(ids->begin(), ids->end());
  return grpc::Status::OK;
}

grpc::Status InferenceService::Detokenize(grpc::ServerContext*,
                                          const pb::DetokenizeRequest* request,
                                          pb::DetokenizeResponse* response) {
  for (int32_t id : request->token_ids()) {
    if (id < 0 || id >= tokenizer_->vocab_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrFormat("token id %d is out of range: the vocabulary has %d "
                                          "tokens",
                                          id, tokenizer_->vocab_size()));
    }
  }
  // The incremental detokenizer replaces invalid UTF-8 with U+FFFD, which a
  // proto string field requires.
  tokenizer::IncrementalDetokenizer detok(*tokenizer_, request->skip_special_tokens());
  std::string text;
  for (int32_t id : request->token_ids()) text += detok.Append(id);
  text += detok.Flush();
  response->set_text(std::move(text));
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelInfo(grpc::ServerContext*, const pb::ModelInfoRequest*,
                                         pb::ModelInfoResponse* response) {
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
  return grpc::Status::OK;
}

}  // namespace tandem::coordinator
