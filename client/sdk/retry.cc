#include "client/sdk/retry.h"

#include <algorithm>
#include <thread>

namespace tandem::sdk {

Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return std::nullopt;
  return std::chrono::system_clock::now() + timeout;
}

void Authorize(const std::string& api_key, grpc::ClientContext& context) {
  if (!api_key.empty()) context.AddMetadata("authorization", "Bearer " + api_key);
}

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::Status RetryUnavailable(const RetryPolicy& policy, const Deadline& deadline,
                              const std::function<absl::Status()>& attempt) {
  std::chrono::duration<double, std::milli> delay(std::max<int64_t>(0, policy.initial.count()));
  const std::chrono::duration<double, std::milli> maximum(policy.maximum.count());
  for (int32_t retry = 0;; ++retry) {
    absl::Status status = attempt();
    if (!absl::IsUnavailable(status) || retry >= policy.max_retries) return status;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min(delay, maximum));
    if (deadline && std::chrono::system_clock::now() + wait >= *deadline) return status;
    std::this_thread::sleep_for(wait);
    delay *= std::max(1.0, policy.multiplier);
  }
}

}  // namespace tandem::sdk
