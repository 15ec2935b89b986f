#include "protocol/generate_response_codec.h"

#include <utility>

namespace tandem::protocol {
namespace {

namespace pb = tandem::v1;
using coordinator::Completion;
using coordinator::CompletionDelta;
using coordinator::FinishReason;
using coordinator::PositionLogprobs;
using coordinator::RequestOutput;

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

void FillCompletion(const Completion& c, int32_t index, int32_t top_logprobs,
                    pb::Completion* out) {
  out->set_index(index);
  out->set_text(c.text);
  out->mutable_token_ids()->Add(c.token_ids.begin(), c.token_ids.end());
  out->set_finish_reason(ToProto(c.finish_reason));
  if (top_logprobs > 0) AddLogprobs(c.logprobs, out->mutable_logprobs());
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
  timings->set_queue_ms(out.queue_ms);
  timings->set_time_to_first_token_ms(out.time_to_first_token_ms);
  timings->set_latency_ms(out.latency_ms);
}

}  // namespace

OutputFormat OutputFormatOf(const pb::GenerateRequest& request) {
  OutputFormat format;
  format.request_id = request.request_id();
  format.top_logprobs = request.sampling().has_logprobs() ? request.sampling().logprobs() : 0;
  format.beam_search = request.decoding_mode() == pb::DECODING_MODE_BEAM_SEARCH;
  return format;
}

void FillStreamResponse(std::vector<CompletionDelta>& deltas, const RequestOutput* done,
                        const OutputFormat& format, pb::GenerateStreamResponse* out) {
  out->set_request_id(format.request_id);
  for (CompletionDelta& d : deltas) {
    AddLogprobs(d.prompt_logprobs, out->mutable_prompt_logprobs());
    pb::CompletionDelta* delta = out->add_deltas();
    delta->set_index(d.index);
    delta->set_text(std::move(d.text));
    delta->mutable_token_ids()->Add(d.token_ids.begin(), d.token_ids.end());
    if (format.top_logprobs > 0) AddLogprobs(d.logprobs, delta->mutable_logprobs());
    delta->set_finish_reason(ToProto(d.finish_reason));
    delta->set_replace(d.replace);
  }
  if (done == nullptr) return;
  FillUsage(*done, out->mutable_usage(), out->mutable_timings());
  // Kept beside the gRPC status for clients that read only messages.
  out->set_error(std::string(done->status.message()));
  if (format.beam_search) {
    for (size_t i = 0; i < done->completions.size(); ++i) {
      FillCompletion(done->completions[i], static_cast<int32_t>(i), format.top_logprobs,
                     out->add_sequences());
    }
  }
}

void FillGenerateResponse(const RequestOutput& done, const OutputFormat& format,
                          pb::GenerateResponse* out) {
  out->set_request_id(format.request_id);
  for (size_t i = 0; i < done.completions.size(); ++i) {
    FillCompletion(done.completions[i], static_cast<int32_t>(i), format.top_logprobs,
                   out->add_completions());
  }
  FillUsage(done, out->mutable_usage(), out->mutable_timings());
  out->set_error(std::string(done.status.message()));
  AddLogprobs(done.prompt_logprobs, out->mutable_prompt_logprobs());
}

}  // namespace tandem::protocol
