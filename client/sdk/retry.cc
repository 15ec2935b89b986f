#include "client/sdk/retry.h"

#include <algorithm>
#include <string>
#include <thread>

namespace tandem::sdk {

Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  // Past a year a deadline means none (and now + timeout cannot overflow).
  constexpr std::chrono::hours kNoDeadline(24 * 366);
  if (timeout.count() <= 0 || timeout > kNoDeadline) return std::nullopt;
  return std::chrono::system_clock::now() + timeout;
}

absl::Status CheckApiKey(const std::string& api_key) {
  for (size_t i = 0; i < api_key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(api_key[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "ClientOptions::api_key holds byte " + std::to_string(c) + " at offset " +
          std::to_string(i) + ": a key is printable ASCII without spaces (33 to 126)");
    }
  }
  return absl::OkStatus();
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
