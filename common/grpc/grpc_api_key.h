// An ApiKey on gRPC calls: the server side checks a call's "authorization"
// metadata, the client side attaches "authorization: Bearer KEY" (as the
// coordinator does on its calls to workers and drafts that require the key).
//
// Thread-safety: stateless.
#ifndef TANDEM_COMMON_GRPC_GRPC_API_KEY_H_
#define TANDEM_COMMON_GRPC_GRPC_API_KEY_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/api_key.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

// ApiKey::Check on the call's "authorization" metadata: OK when `key` is
// open or the call carries it; UNAUTHENTICATED otherwise.
absl::Status CheckCallApiKey(const ApiKey& key, const grpc::ServerContextBase& context);

// Adds "authorization: Bearer KEY" to `context` when `key` is set.
void AttachApiKey(grpc::ClientContext& context, const std::optional<std::string>& key);

}  // namespace tandem

#endif  // TANDEM_COMMON_GRPC_GRPC_API_KEY_H_
