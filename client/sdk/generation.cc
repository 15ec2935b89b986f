// FinishReasonName and ResultAssembler (include/tandem/generation.h).
#include "tandem/generation.h"

namespace tandem {
namespace {

// sampling.n is at most 128 (inference.proto); a delta with an index past
// that is not from a conforming server and is dropped rather than trusted
// to size a vector.
constexpr int32_t kMaxCompletions = 128;

void ApplyDelta(const CompletionDelta& d, Completion& c) {
  c.index = d.index;
  if (d.replace) {
    c.text = d.text;
    c.token_ids = d.token_ids;
  } else {
    c.text += d.text;
    c.token_ids.insert(c.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
  }
  c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  if (d.finish_reason != FinishReason::kNone) c.finish_reason = d.finish_reason;
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "";
}

void ResultAssembler::Add(const StreamEvent& event) {
  if (result_.request_id.empty()) result_.request_id = event.request_id;
  for (const CompletionDelta& d : event.deltas) {
    if (d.index < 0 || d.index >= kMaxCompletions) continue;
    if (d.index >= static_cast<int32_t>(result_.completions.size())) {
      result_.completions.resize(d.index + 1);
      for (int32_t i = 0; i <= d.index; ++i) result_.completions[i].index = i;
    }
    ApplyDelta(d, result_.completions[d.index]);
  }
  result_.prompt_logprobs.insert(result_.prompt_logprobs.end(), event.prompt_logprobs.begin(),
                                 event.prompt_logprobs.end());
  // Beam search's last event: every returned sequence, best first.
  if (!event.sequences.empty()) result_.completions = event.sequences;
  if (event.usage) result_.usage = *event.usage;
  if (event.timings) result_.timings = *event.timings;
  if (!event.error.empty()) result_.error = event.error;
}

}  // namespace tandem
