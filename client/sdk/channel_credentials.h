// The credentials of a Client's channel (ClientOptions::tls, tls_ca_file):
// plaintext, or TLS trusting a CA file or the system's roots.
#ifndef TANDEM_CLIENT_SDK_CHANNEL_CREDENTIALS_H_
#define TANDEM_CLIENT_SDK_CHANNEL_CREDENTIALS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "tandem/client.h"

namespace tandem::sdk {

// Insecure credentials unless `options` ask for TLS; TLS credentials trusting
// the PEM certificates of options.tls_ca_file (read now, at most 1 MiB) or,
// when it is empty, gRPC's default roots. NOT_FOUND naming the file when it
// cannot be read; INVALID_ARGUMENT when it holds no PEM certificate.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientOptions& options);

}  // namespace tandem::sdk

#endif  // TANDEM_CLIENT_SDK_CHANNEL_CREDENTIALS_H_
