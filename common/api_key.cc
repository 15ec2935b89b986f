#include "common/api_key.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace tandem {
namespace {

constexpr std::string_view kScheme = "bearer ";

// Equal in time that depends only on the lengths (the key's fixed one and
// the candidate's), not on where they first differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

}  // namespace

absl::Status ValidateApiKey(const std::string& key, const std::string& source) {
  if (key.empty()) return absl::InvalidArgumentError(absl::StrFormat("%s is empty", source));
  if (key.size() > kMaxApiKeyBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is %d bytes long: at most %d", source, key.size(), kMaxApiKeyBytes));
  }
  // Printable ASCII only: what an HTTP header and gRPC metadata carry
  // as they are (gRPC clients reject other bytes in metadata values).
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s holds byte 0x%02x at offset %d: a key is printable ASCII without spaces "
          "(0x21 to 0x7e)", source, c, i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ApiKey> ApiKey::FromFlags(const std::string& key, const std::string& file) {
  if (!key.empty() && !file.empty()) {
    return absl::InvalidArgumentError("give --api-key or --api-key-file, not both");
  }
  if (key.empty() && file.empty()) return ApiKey();
  std::string value = key;
  std::string source = "--api-key";
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return absl::NotFoundError(absl::StrFormat("cannot read --api-key-file '%s'", file));
    std::stringstream content;
    content << in.rdbuf();
    value = std::string(absl::StripAsciiWhitespace(content.str()));
    source = absl::StrFormat("the key in --api-key-file '%s'", file);
  }
  if (absl::Status s = ValidateApiKey(value, source); !s.ok()) return s;
  return ApiKey(std::move(value));
}

absl::Status ApiKey::Check(std::optional<std::string_view> authorization) const {
  if (!key_.has_value()) return absl::OkStatus();
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        "this server requires an API key: send the header 'authorization: Bearer KEY'");
  }
  const std::string_view value = *authorization;
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(value.data(), kScheme.size()),
                              absl::string_view(kScheme.data(), kScheme.size())) ||
      !ConstantTimeEquals(*key_, value.substr(kScheme.size()))) {
    return absl::UnauthenticatedError(
        "the API key is missing or wrong: send 'authorization: Bearer KEY' with this server's key");
  }
  return absl::OkStatus();
}

}  // namespace tandem
