// InternalChannelCredentials: how the coordinator reaches its worker groups
// and draft workers — plaintext by default, or TLS trusting `ca_pem` (the
// PEM certificates of --internal-tls-ca, ReadTlsCaFile) when workers and
// drafts serve --tls-cert / --tls-key. The server's name is checked against
// the address dialled (an IP SAN for 127.0.0.1:PORT, a DNS SAN for a name).
#ifndef TANDEM_COMMON_GRPC_INTERNAL_CHANNEL_H_
#define TANDEM_COMMON_GRPC_INTERNAL_CHANNEL_H_

#include <memory>
#include <string>

#include "grpcpp/security/credentials.h"

namespace tandem {

std::shared_ptr<grpc::ChannelCredentials> InternalChannelCredentials(const std::string& ca_pem);

}  // namespace tandem

#endif  // TANDEM_COMMON_GRPC_INTERNAL_CHANNEL_H_
