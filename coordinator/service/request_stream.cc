#include "coordinator/service/request_stream.h"

#include <utility>

namespace tandem::coordinator {

void RequestStream::PushDelta(const CompletionDelta& delta) {
  auto [it, inserted] = pending_.try_emplace(delta.index, delta);
  if (inserted) return;
  CompletionDelta& merged = it->second;
  if (delta.replace) {
    merged = delta;
    return;
  }
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
