#include "common/grpc/internal_channel.h"

namespace tandem {

std::shared_ptr<grpc::ChannelCredentials> InternalChannelCredentials(const std::string& ca_pem) {
  if (ca_pem.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem;
  return grpc::SslCredentials(ssl);
}

grpc::ChannelArguments InternalChannelArguments() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

std::chrono::system_clock::time_point GrpcDeadlineAfter(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

}  // namespace tandem
