// ApiKey: the shared secret a public port requires (tandem-coordinator
// --api-key / --api-key-file), checked against a request's
// "authorization: Bearer KEY" (gRPC metadata or HTTP header, as the OpenAI
// SDK and tandem's SDKs send it). An empty ApiKey lets everything through.
// Errors never echo a presented key.
//
// Thread-safety: immutable after construction; Check from any thread.
#ifndef TANDEM_COMMON_API_KEY_H_
#define TANDEM_COMMON_API_KEY_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {

// The longest key accepted: keys are compared in time independent of their
// content up to this length.
inline constexpr size_t kMaxApiKeyBytes = 4096;

// OK when `key` is a usable key: 1..kMaxApiKeyBytes bytes of printable
// ASCII without spaces (0x21..0x7e); else InvalidArgument naming `source`
// (e.g. "--api-key"), the offending byte and its offset, never the key.
absl::Status ValidateApiKey(const std::string& key, const std::string& source);

class ApiKey {
 public:
  ApiKey() = default;  // open: no key required

  // From --api-key (`key`) or, when that is empty, --api-key-file (`file`,
  // its content with surrounding whitespace removed); both empty → open.
  // InvalidArgument when both are given or the key fails ValidateApiKey; NotFound naming the file when it cannot be read.
  static absl::StatusOr<ApiKey> FromFlags(const std::string& key, const std::string& file);

  bool required() const { return key_.has_value(); }
  // The key, to present it to a server that requires the same one (the
  // coordinator to its workers and drafts); nullopt when open.
  const std::optional<std::string>& key() const { return key_; }

  // OK when no key is required or `authorization` (the header's or
  // metadata's value; nullopt when absent) is "Bearer KEY" with this key
  // (the scheme case-insensitive); else UNAUTHENTICATED saying what is
  // expected.
  absl::Status Check(std::optional<std::string_view> authorization) const;

 private:
  explicit ApiKey(std::string key) : key_(std::move(key)) {}
  std::optional<std::string> key_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_API_KEY_H_
