#include "common/grpc/internal_channel.h"

namespace tandem {

std::shared_ptr<grpc::ChannelCredentials> InternalChannelCredentials(const std::string& ca_pem) {
  if (ca_pem.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem;
  return grpc::SslCredentials(ssl);
}

}  // namespace tandem
