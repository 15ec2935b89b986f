#include "coordinator/service/request_stream.h"

#include <utility>
#include <vector>

namespace tandem::coordinator {

void RequestStream::PushDelta(const CompletionDelta& delta) {
  auto [it, inserted] = pending_.try_emplace(delta.index, delta);
  if (inserted) return;
  CompletionDelta& merged = it->second;
  // The request's prompt logprobs come once, with its first delta: they
  // outlive a replacing delta and merge into an entry that had none.
  std::vector<PositionLogprobs> prompt_logprobs = std::move(merged.prompt_logprobs);
  if (prompt_logprobs.empty()) prompt_logprobs = delta.prompt_logprobs;
  if (delta.replace) {
    merged = delta;
    merged.prompt_logprobs = std::move(prompt_logprobs);
    return;
  }
  merged.prompt_logprobs = std::move(prompt_logprobs);
  merged.text += delta.text;
  merged.token_ids.insert(merged.token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
  merged.logprobs.insert(merged.logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
  if (delta.finish_reason != FinishReason::kNone) merged.finish_reason = delta.finish_reason;
}

void RequestStream::PushFinished(const RequestOutput& output) {
  finished_ = output;
  finished_pushed_ = true;
}

RequestStream::Batch RequestStream::Take() {
  Batch batch;
  batch.deltas.reserve(pending_.size());
  for (auto& [index, delta] : pending_) batch.deltas.push_back(std::move(delta));
  pending_.clear();
  batch.finished = std::move(finished_);
  finished_.reset();
  return batch;
}

}  // namespace tandem::coordinator
