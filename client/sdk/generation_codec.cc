#include "client/sdk/generation_codec.h"

#include <type_traits>

namespace tandem::sdk {
namespace {

// The knobs that shape the distribution.
void WarpersToProto(const SamplingOptions& s, v1::SamplingParams* p) {
  if (s.temperature) p->set_temperature(*s.temperature);
  if (s.top_k) p->set_top_k(*s.top_k);
  if (s.top_p) p->set_top_p(*s.top_p);
  if (s.min_p) p->set_min_p(*s.min_p);
  if (s.repetition_penalty) p->set_repetition_penalty(*s.repetition_penalty);
  if (s.presence_penalty) p->set_presence_penalty(*s.presence_penalty);
  if (s.frequency_penalty) p->set_frequency_penalty(*s.frequency_penalty);
  if (s.seed) p->set_seed(*s.seed);
}

void SamplingToProto(const SamplingOptions& s, v1::SamplingParams* p) {
  WarpersToProto(s, p);
  if (s.max_tokens) p->set_max_tokens(*s.max_tokens);
  if (s.min_tokens) p->set_min_tokens(*s.min_tokens);
  p->mutable_stop_token_ids()->Add(s.stop_token_ids.begin(), s.stop_token_ids.end());
  for (const std::string& stop : s.stop) p->add_stop(stop);
  if (s.ignore_eos) p->set_ignore_eos(*s.ignore_eos);
  if (s.logprobs) p->set_logprobs(*s.logprobs);
  if (s.n) p->set_n(*s.n);
  if (s.prompt_logprobs) p->set_prompt_logprobs(*s.prompt_logprobs);
}

v1::EarlyStopping EarlyStoppingToProto(EarlyStopping e) {
  switch (e) {
    case EarlyStopping::kTrue: return v1::EARLY_STOPPING_TRUE;
    case EarlyStopping::kFalse: return v1::EARLY_STOPPING_FALSE;
    case EarlyStopping::kNever: return v1::EARLY_STOPPING_NEVER;
    case EarlyStopping::kUnspecified: break;
  }
  return v1::EARLY_STOPPING_UNSPECIFIED;
}

void BeamToProto(const BeamSearchOptions& b, v1::BeamSearchOptions* p) {
  p->set_num_beams(b.num_beams);
  if (b.length_penalty) p->set_length_penalty(*b.length_penalty);
  p->set_early_stopping(EarlyStoppingToProto(b.early_stopping));
  p->set_num_return_sequences(b.num_return_sequences);
  p->set_num_beam_groups(b.num_beam_groups);
  p->set_diversity_penalty(b.diversity_penalty);
  p->set_do_sample(b.do_sample);
}

void PromptToProto(const Prompt& prompt, v1::GenerateRequest* p) {
  std::visit(
      [p](const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) {
          p->set_text(value);
        } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
          p->mutable_token_ids()->mutable_ids()->Add(value.begin(), value.end());
        } else {
          *p->mutable_chat() = ChatPromptToProto(value);
        }
      },
      prompt);
}

FinishReason FinishReasonFromProto(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_STOP: return FinishReason::kStop;
    case v1::FINISH_REASON_LENGTH: return FinishReason::kLength;
    case v1::FINISH_REASON_CANCELLED: return FinishReason::kCancelled;
    case v1::FINISH_REASON_ERROR: return FinishReason::kError;
    default: return FinishReason::kNone;
  }
}

std::vector<PositionLogprobs> LogprobsFromProto(
    const google::protobuf::RepeatedPtrField<v1::PositionLogprobs>& protos) {
  std::vector<PositionLogprobs> out;
  out.reserve(protos.size());
  for (const v1::PositionLogprobs& p : protos) {
    PositionLogprobs lp{p.token(), p.logprob(), {}};
    for (const v1::TokenLogprob& t : p.top_logprobs()) lp.top.push_back({t.token(), t.logprob()});
    out.push_back(std::move(lp));
  }
  return out;
}

Completion CompletionFromProto(const v1::Completion& p) {
  Completion c;
  c.index = p.index();
  c.text = p.text();
  c.token_ids.assign(p.token_ids().begin(), p.token_ids().end());
  c.finish_reason = FinishReasonFromProto(p.finish_reason());
  c.logprobs = LogprobsFromProto(p.logprobs());
  if (p.has_score()) c.score = p.score();
  return c;
}

Usage UsageFromProto(const v1::Usage& p) {
  return {p.prompt_tokens(), p.completion_tokens(), p.total_tokens(), p.cached_prompt_tokens()};
}

RequestTimings TimingsFromProto(const v1::RequestTimings& p) {
  return {p.queue_ms(), p.time_to_first_token_ms(), p.latency_ms()};
}

WorkerGroupStatus WorkerGroupFromProto(const v1::WorkerGroupStatus& p) {
  return {p.address(),         p.healthy(),
          p.draining(),        p.load(),
          p.num_steps(),       p.step_ms(),
          p.worker_step_ms(),  p.num_generated_tokens(),
          p.num_prompt_tokens_computed(), p.num_preemptions(),
          p.num_blocks_used(), p.num_blocks_total(),
          p.num_speculative_rounds(), p.num_draft_tokens(),
          p.num_accepted_tokens(), p.num_migrations(),
          p.num_migration_failures()};
}

}  // namespace

v1::ChatMessages ChatPromptToProto(const ChatPrompt& chat) {
  v1::ChatMessages p;
  p.set_add_generation_prompt(chat.add_generation_prompt);
  for (const ChatMessage& m : chat.messages) {
    v1::ChatMessage* out = p.add_messages();
    out->set_role(m.role);
    out->set_content(m.content);
  }
  return p;
}

v1::GenerateRequest GenerateRequestToProto(const GenerateRequest& r) {
  v1::GenerateRequest p;
  p.set_request_id(r.request_id);
  PromptToProto(r.prompt, &p);
  SamplingToProto(r.sampling, p.mutable_sampling());
  p.set_priority(r.priority);
  if (r.beam_search) {
    p.set_decoding_mode(v1::DECODING_MODE_BEAM_SEARCH);
    BeamToProto(*r.beam_search, p.mutable_beam_search());
  } else if (r.speculative) {
    p.set_decoding_mode(v1::DECODING_MODE_SPECULATIVE);
    p.mutable_speculative()->set_num_speculative_tokens(r.speculative->num_speculative_tokens);
    p.mutable_speculative()->set_draft(r.speculative->draft);
    p.mutable_speculative()->set_off(r.speculative->off);
  } else {
    p.set_decoding_mode(v1::DECODING_MODE_SAMPLING);
  }
  return p;
}

StreamEvent StreamEventFromProto(const v1::GenerateStreamResponse& p) {
  StreamEvent e;
  e.request_id = p.request_id();
  for (const v1::CompletionDelta& d : p.deltas()) {
    e.deltas.push_back({d.index(), d.text(), {d.token_ids().begin(), d.token_ids().end()},
                        LogprobsFromProto(d.logprobs()), FinishReasonFromProto(d.finish_reason()),
                        d.replace()});
  }
  e.prompt_logprobs = LogprobsFromProto(p.prompt_logprobs());
  if (p.has_usage()) e.usage = UsageFromProto(p.usage());
  if (p.has_timings()) e.timings = TimingsFromProto(p.timings());
  for (const v1::Completion& s : p.sequences()) e.sequences.push_back(CompletionFromProto(s));
  e.error = p.error();
  return e;
}

GenerateResult GenerateResultFromProto(const v1::GenerateResponse& p) {
  GenerateResult r;
  r.request_id = p.request_id();
  for (const v1::Completion& c : p.completions()) r.completions.push_back(CompletionFromProto(c));
  r.usage = UsageFromProto(p.usage());
  r.timings = TimingsFromProto(p.timings());
  r.prompt_logprobs = LogprobsFromProto(p.prompt_logprobs());
  r.error = p.error();
  return r;
}

ModelInfo ModelInfoFromProto(const v1::ModelInfoResponse& p) {
  ModelInfo m;
  m.model_name = p.model_name();
  m.vocab_size = p.vocab_size();
  m.context_length = p.context_length();
  m.eos_token_ids.assign(p.eos_token_ids().begin(), p.eos_token_ids().end());
  m.has_chat_template = p.has_chat_template();
  for (int mode : p.decoding_modes()) {
    if (mode == v1::DECODING_MODE_BEAM_SEARCH) m.beam_search = true;
    if (mode == v1::DECODING_MODE_SPECULATIVE) m.speculative = true;
  }
  for (const v1::WorkerGroupStatus& g : p.worker_groups()) {
    m.worker_groups.push_back(WorkerGroupFromProto(g));
  }
  for (const v1::DraftWorkerStatus& d : p.draft_workers()) {
    m.draft_workers.push_back({d.address(), d.healthy(), d.model_name()});
  }
  return m;
}

}  // namespace tandem::sdk
