#include "common/grpc/grpc_api_key.h"

#include <string_view>

namespace tandem {

absl::Status CheckCallApiKey(const ApiKey& key, const grpc::ServerContextBase& context) {
  if (!key.required()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return key.Check(std::nullopt);
  return key.Check(std::string_view(it->second.data(), it->second.size()));
}

void AttachApiKey(grpc::ClientContext& context, const std::optional<std::string>& key) {
  if (key.has_value()) context.AddMetadata("authorization", "Bearer " + *key);
}

}  // namespace tandem
