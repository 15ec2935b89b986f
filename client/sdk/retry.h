// Retrying a call that failed with UNAVAILABLE before it delivered anything
// (RetryPolicy in include/tandem/client.h), gRPC → absl status codes, and
// the per-call API key: what every call of the SDK goes through.
#ifndef TANDEM_CLIENT_SDK_RETRY_H_
#define TANDEM_CLIENT_SDK_RETRY_H_

#include <chrono>
#include <functional>
#include <optional>

#include "absl/status/status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tandem/client.h"

namespace tandem::sdk {

using Deadline = std::optional<std::chrono::system_clock::time_point>;

// The call's absolute deadline: now + timeout, or none for 0 (or over a
// year).
Deadline DeadlineAfter(std::chrono::milliseconds timeout);

// OK for an empty key or one of printable ASCII without spaces (what gRPC
// metadata carries; the C++ gRPC client aborts the process on other bytes);
// else InvalidArgument naming the byte and its offset, never the key.
absl::Status CheckApiKey(const std::string& api_key);

// Adds "authorization: Bearer KEY" to `context` unless `api_key` is empty
// (checked by CheckApiKey first).
void Authorize(const std::string& api_key, grpc::ClientContext& context);

// The same code (both follow google.rpc.Code) and message.
absl::Status FromGrpc(const grpc::Status& status);

// Runs `attempt` until it returns anything but UNAVAILABLE, the policy's
// retries are spent or the next wait would end past `deadline`; returns the
// last attempt's status. A negative max_retries counts as 0.
absl::Status RetryUnavailable(const RetryPolicy& policy, const Deadline& deadline,
                              const std::function<absl::Status()>& attempt);

}  // namespace tandem::sdk

#endif  // TANDEM_CLIENT_SDK_RETRY_H_
