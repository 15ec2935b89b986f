#include "client/inference_client.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "absl/strings/str_format.h"

namespace tandem::client {
namespace {

coordinator::FinishReason ToFinishReason(tandem::FinishReason r) {
  switch (r) {
    case tandem::FinishReason::kStop: return coordinator::FinishReason::kStop;
    case tandem::FinishReason::kLength: return coordinator::FinishReason::kLength;
    case tandem::FinishReason::kCancelled: return coordinator::FinishReason::kCancelled;
    case tandem::FinishReason::kError: return coordinator::FinishReason::kError;
    case tandem::FinishReason::kNone: break;
  }
  return coordinator::FinishReason::kNone;
}

tandem::SamplingOptions SdkSampling(const sampling::SamplingParams& p) {
  tandem::SamplingOptions s;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repetition_penalty = p.repetition_penalty;
  s.presence_penalty = p.presence_penalty;
  s.frequency_penalty = p.frequency_penalty;
  if (p.seed.has_value()) s.seed = *p.seed;
  s.max_tokens = p.max_tokens;
  s.min_tokens = p.min_tokens;
  s.stop_token_ids = p.stop_token_ids;
  s.stop = p.stop;
  s.ignore_eos = p.ignore_eos;
  s.logprobs = p.logprobs;
  s.n = p.n;
  if (p.prompt_logprobs >= 0) s.prompt_logprobs = p.prompt_logprobs;
  return s;
}

tandem::EarlyStopping SdkEarlyStopping(coordinator::EarlyStopping e) {
  switch (e) {
    case coordinator::EarlyStopping::kTrue: return tandem::EarlyStopping::kTrue;
    case coordinator::EarlyStopping::kNever: return tandem::EarlyStopping::kNever;
    case coordinator::EarlyStopping::kFalse: break;
  }
  return tandem::EarlyStopping::kFalse;
}

tandem::BeamSearchOptions SdkBeam(const coordinator::BeamSearchParams& b) {
  tandem::BeamSearchOptions o;
  o.num_beams = b.num_beams;
  o.length_penalty = b.length_penalty;
  o.early_stopping = SdkEarlyStopping(b.early_stopping);
  o.num_return_sequences = b.num_return_sequences;
  o.num_beam_groups = b.num_beam_groups;
  o.diversity_penalty = b.diversity_penalty;
  o.do_sample = b.do_sample;
  return o;
}

}  // namespace

std::unique_ptr<tandem::Client> NewClient(const std::string& addr, int32_t timeout_s,
                                          const std::string& tls_ca, bool retry) {
  tandem::ClientOptions options;
  options.tls_ca_file = tls_ca;
  options.timeout = std::chrono::seconds(std::max(0, timeout_s));
  if (!retry) options.retry.max_retries = 0;
  if (const char* key = std::getenv("TANDEM_API_KEY"); key != nullptr) options.api_key = key;
  return std::make_unique<tandem::Client>(addr, options);
}

tandem::GenerateRequest SdkRequest(const JsonRequest& r) {
  tandem::GenerateRequest g;
  if (r.prompt) {
    g.prompt = *r.prompt;
  } else if (r.prompt_token_ids) {
    g.prompt = *r.prompt_token_ids;
  } else {
    tandem::ChatPrompt chat;
    for (const tokenizer::ChatMessage& m : r.messages) chat.messages.push_back({m.role, m.content});
    g.prompt = std::move(chat);
  }
  g.sampling = SdkSampling(r.params);
  g.priority = r.priority;
  if (r.beam.has_value()) {
    g.beam_search = SdkBeam(*r.beam);
  } else if (r.num_speculative_tokens.has_value() || !r.draft.empty()) {
    g.speculative = tandem::SpeculativeOptions{
        .num_speculative_tokens = r.num_speculative_tokens.value_or(0),
        .draft = r.draft,
        .off = r.num_speculative_tokens == 0};
  }
  return g;
}

std::vector<coordinator::PositionLogprobs> ToPositionLogprobs(
    const std::vector<tandem::PositionLogprobs>& logprobs) {
  std::vector<coordinator::PositionLogprobs> out;
  out.reserve(logprobs.size());
  for (const tandem::PositionLogprobs& p : logprobs) {
    coordinator::PositionLogprobs lp;
    lp.token = p.token;
    lp.logprob = p.logprob;
    for (const tandem::TokenLogprob& t : p.top) lp.top.push_back({t.token, t.logprob});
    out.push_back(std::move(lp));
  }
  return out;
}

coordinator::Completion ToCompletion(const tandem::Completion& c) {
  coordinator::Completion out;
  out.text = c.text;
  out.token_ids = c.token_ids;
  out.finish_reason = ToFinishReason(c.finish_reason);
  out.logprobs = ToPositionLogprobs(c.logprobs);
  out.score = c.score;
  return out;
}

StreamedGeneration StreamGenerate(tandem::Client& client, const tandem::GenerateRequest& request,
                                  int32_t num_completions,
                                  const std::function<void(const std::string&)>& on_text) {
  StreamedGeneration g;
  absl::StatusOr<tandem::GenerateResult> result =
      client.Stream(request, [&](const tandem::StreamEvent& event) {
        if (!on_text) return;
        for (const tandem::CompletionDelta& d : event.deltas) {
          if (d.index == 0 && !d.text.empty() && !d.replace) on_text(d.text);
        }
      });
  if (!result.ok()) {
    g.status = result.status();
    return g;
  }
  // Sampling: n completions by index; beam search: the returned sequences.
  g.completions.resize(request.beam_search ? result->completions.size()
                                           : static_cast<size_t>(std::max(1, num_completions)));
  for (size_t i = 0; i < std::min(g.completions.size(), result->completions.size()); ++i) {
    g.completions[i] = ToCompletion(result->completions[i]);
  }
  g.cached_prompt_tokens = result->usage.cached_prompt_tokens;
  g.prompt_logprobs = ToPositionLogprobs(result->prompt_logprobs);
  g.error = result->error;
  return g;
}

std::string DescribeStatus(const absl::Status& s) {
  return absl::StrFormat("%s: %s", absl::StatusCodeToString(s.code()), s.message());
}

}  // namespace tandem::client
