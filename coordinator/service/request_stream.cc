#include "coordinator/service/request_stream.h"

namespace tandem::coordinator {

void RequestStream::PushDelta(const CompletionDelta& delta) {
  absl::MutexLock lock(&mutex_);
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
  absl::MutexLock lock(&mutex_);
  finished_ = output;
}

RequestStream::Batch RequestStream::Wait(absl::Time deadline) {
  absl::MutexLock lock(&mutex_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return HasPending(); };
  mutex_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  Batch batch;
  for (auto& [index, delta] : pending_) batch.deltas.push_back(std::move(delta));
  pending_.clear();
  if (finished_.has_value() && !finished_taken_) {
    batch.finished = std::move(*finished_);
    finished_taken_ = true;
  }
  return batch;
}

}  // namespace tandem::coordinator
