#include "client/inference_client.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "protocol/beam_search_codec.h"
#include "protocol/beam_search_codec.h"
#include "protocol/sampling_codec.h"

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

coordinator::PositionLogprobs FromProto(const pb::PositionLogprobs& p) {
  coordinator::PositionLogprobs lp;
  lp.token = p.token();
  lp.logprob = p.logprob();
  for (const pb::TokenLogprob& t : p.top_logprobs()) lp.top.push_back({t.token(), t.logprob()});
  return lp;
}

coordinator::FinishReason FromProto(pb::FinishReason r) {
  switch (r) {
    case pb::FINISH_REASON_STOP: return coordinator::FinishReason::kStop;
    case pb::FINISH_REASON_LENGTH: return coordinator::FinishReason::kLength;
    case pb::FINISH_REASON_CANCELLED: return coordinator::FinishReason::kCancelled;
    case pb::FINISH_REASON_ERROR: return coordinator::FinishReason::kError;
    default: return coordinator::FinishReason::kNone;
  }
}

}  // namespace

std::shared_ptr<grpc::Channel> NewInferenceChannel(const std::string& addr) {
  return grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
}

std::unique_ptr<pb::Inference::Stub> NewInferenceStub(const std::string& addr) {
  return pb::Inference::NewStub(NewInferenceChannel(addr));
}

StreamedGeneration StreamGenerate(pb::Inference::Stub& stub, const pb::GenerateRequest& request,
                                  int32_t num_completions, int32_t timeout_s,
                                  const std::function<void(const std::string&)>& on_text) {
  StreamedGeneration result;
  result.completions.resize(std::max(1, num_completions));
  grpc::ClientContext context;
  SetDeadline(context, timeout_s);
  std::unique_ptr<grpc::ClientReader<pb::GenerateStreamResponse>> reader =
      stub.GenerateStream(&context, request);
  pb::GenerateStreamResponse msg;
  while (reader->Read(&msg)) {
    for (const pb::CompletionDelta& d : msg.deltas()) {
      if (d.index() < 0 || d.index() >= static_cast<int32_t>(result.completions.size())) continue;
      coordinator::Completion& c = result.completions[d.index()];
      if (d.replace()) {
        // Beam search: the best beam so far, in full.
        c.text = d.text();
        c.token_ids.assign(d.token_ids().begin(), d.token_ids().end());
      } else {
        c.text += d.text();
        c.token_ids.insert(c.token_ids.end(), d.token_ids().begin(), d.token_ids().end());
      }
      if (d.finish_reason() != pb::FINISH_REASON_UNSPECIFIED) {
        c.finish_reason = FromProto(d.finish_reason());
      }
      for (const pb::PositionLogprobs& p : d.logprobs()) c.logprobs.push_back(FromProto(p));
      if (d.index() == 0 && on_text && !d.text().empty() && !d.replace()) on_text(d.text());
    }
    for (const pb::PositionLogprobs& p : msg.prompt_logprobs()) {
      result.prompt_logprobs.push_back(FromProto(p));
    }
    if (msg.sequences_size() > 0) {
      // Beam search's last message: every returned sequence, best first.
      result.completions.clear();
      for (const pb::Completion& s : msg.sequences()) {
        coordinator::Completion c;
        c.text = s.text();
        c.token_ids.assign(s.token_ids().begin(), s.token_ids().end());
        c.finish_reason = FromProto(s.finish_reason());
        if (s.has_score()) c.score = s.score();
        result.completions.push_back(std::move(c));
      }
    }
    if (msg.has_usage()) result.cached_prompt_tokens = msg.usage().cached_prompt_tokens();
    if (!msg.error().empty()) result.error = msg.error();
  }
  result.status = reader->Finish();
  return result;
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
  protocol::SamplingParamsToProto(r.params, g.mutable_sampling());
  g.set_priority(r.priority);
  if (r.beam.has_value()) {
    g.set_decoding_mode(pb::DECODING_MODE_BEAM_SEARCH);
    protocol::BeamSearchParamsToProto(*r.beam, g.mutable_beam_search());
  } else if (r.num_speculative_tokens.has_value() || !r.draft.empty()) {
    g.set_decoding_mode(pb::DECODING_MODE_SPECULATIVE);
    g.mutable_speculative()->set_off(r.num_speculative_tokens == 0);
    g.mutable_speculative()->set_num_speculative_tokens(r.num_speculative_tokens.value_or(0));
    g.mutable_speculative()->set_draft(r.draft);
  } else {
    g.set_decoding_mode(pb::DECODING_MODE_SAMPLING);
  }
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
