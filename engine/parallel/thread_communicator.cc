#include "engine/parallel/thread_communicator.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace tandem::parallel {

ThreadWorld::ThreadWorld(int world_size)
    : world_size_(world_size), barrier_(world_size), buffers_(world_size), counts_(world_size) {}

std::vector<std::unique_ptr<Communicator>> ThreadWorld::MakeCommunicators() {
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < world_size_; ++r) comms.push_back(std::make_unique<ThreadCommunicator>(this, r));
  return comms;
}

ThreadCommunicator::ThreadCommunicator(ThreadWorld* world, int rank) : world_(world), rank_(rank) {}

absl::Status ThreadCommunicator::AllReduceSum(float* data, int64_t n) {
  // A negative n still takes part in the exchange (the others would wait),
  // and fails like mismatched counts.
  world_->buffers_[rank_] = data;
  world_->counts_[rank_] = n;
  world_->barrier_.arrive_and_wait();
  const bool same_n = n >= 0 && std::all_of(world_->counts_.begin(), world_->counts_.end(),
                                            [n](int64_t c) { return c == n; });
  if (same_n && n > 0) {
    const float* first = world_->buffers_[0];
    sum_.assign(first, first + n);
    for (int r = 1; r < world_size(); ++r) {
      const float* part = world_->buffers_[r];
      for (int64_t i = 0; i < n; ++i) sum_[i] += part[i];
    }
  }
  world_->barrier_.arrive_and_wait();
  if (!same_n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "AllReduceSum: rank %d passed n %d; every rank must pass the same n >= 0", rank_, n));
  }
  if (n > 0) std::copy(sum_.begin(), sum_.end(), data);
  return absl::OkStatus();
}

absl::Status ThreadCommunicator::Broadcast(std::string* bytes, int root) {
  if (root < 0 || root >= world_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "broadcast root %d is out of range: the world has %d ranks", root, world_size()));
  }
  if (rank_ == root) world_->root_bytes_ = bytes;
  world_->barrier_.arrive_and_wait();
  if (rank_ != root) *bytes = *world_->root_bytes_;
  world_->barrier_.arrive_and_wait();
  return absl::OkStatus();
}

}  // namespace tandem::parallel
