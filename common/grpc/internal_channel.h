// InternalChannelCredentials: how the coordinator reaches its worker groups
// and draft workers — plaintext by default, or TLS trusting `ca_pem` (the
// PEM certificates of --internal-tls-ca, ReadTlsCaFile) when workers and
// drafts serve --tls-cert / --tls-key. The server's name is checked against
// the address dialled (an IP SAN for 127.0.0.1:PORT, a DNS SAN for a name).
// InternalChannelArguments: the channel settings every such channel shares.
#ifndef TANDEM_COMMON_GRPC_INTERNAL_CHANNEL_H_
#define TANDEM_COMMON_GRPC_INTERNAL_CHANNEL_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace tandem {

std::shared_ptr<grpc::ChannelCredentials> InternalChannelCredentials(const std::string& ca_pem);

// Reconnect backoff capped at 1 s: a lost worker or draft is retried about
// once a second (SchedulerLoop, DraftWorkerSet); gRPC's default backoff
// would grow to minutes and delay its return.
grpc::ChannelArguments InternalChannelArguments();

// A gRPC deadline `d` from now.
std::chrono::system_clock::time_point GrpcDeadlineAfter(absl::Duration d);

}  // namespace tandem

#endif  // TANDEM_COMMON_GRPC_INTERNAL_CHANNEL_H_
